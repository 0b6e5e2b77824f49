"""TPC-H views kept current under refresh: the tables, the refresh changelogs, the queries.

Tables come as Parquet files ``<table>.parquet`` (as ``tpchgen-cli parquet`` writes
them); :func:`read_tables` reads the columns the queries use, with strings as
``string`` and decimals as ``float64`` (the engine's running sums are on floats).

The refresh functions of the specification: RF1 inserts new orders with their
lineitems, RF2 deletes old orders with their lineitems, each ``fraction`` of the orders
(0.1%) per refresh.  ``tpchgen-cli`` does not write the update sets, so RF1's orders are
drawn here by the specification's population rules, under the order keys the sparse
initial load leaves free (as its update sets use them), and RF2 deletes orders of the
initial load, each once.  A refresh is one
changelog per table (``diff`` +1 / -1), applied at one logical time.

The queries Q1, Q3, Q5, Q6, Q10, Q12 and Q14 are incremental dataflows (running joins
and running aggregates of changelogs) with the specification's validation substitution
parameters; each returns a changelog whose collection is the query's answer (Q3's and
Q10's ``ORDER BY`` / ``LIMIT`` a ``top_k`` of the grouped view; the others' ``ORDER BY``
is left to the reader of the collection).

>>> sorted(TPCH_QUERIES)
['q1', 'q10', 'q12', 'q14', 'q3', 'q5', 'q6']
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from ..dataflow.stream import Stream

__all__ = ["COLUMNS", "TPCH_QUERIES", "new_orders_of", "read_tables", "refreshes"]

REFRESH_FRACTION = 0.001            # of the orders, per refresh function
Q3_LIMIT, Q10_LIMIT = 10, 20        # the rows the specification's Q3 and Q10 return

COLUMNS = {
    "lineitem": ["l_orderkey", "l_partkey", "l_suppkey", "l_linenumber", "l_quantity", "l_extendedprice",
                 "l_discount", "l_tax", "l_returnflag", "l_linestatus", "l_shipdate", "l_commitdate",
                 "l_receiptdate", "l_shipmode"],
    "orders": ["o_orderkey", "o_custkey", "o_orderdate", "o_orderpriority", "o_shippriority"],
    "customer": ["c_custkey", "c_name", "c_address", "c_nationkey", "c_phone", "c_acctbal", "c_mktsegment",
                 "c_comment"],
    "part": ["p_partkey", "p_type"],
    "supplier": ["s_suppkey", "s_nationkey"],
    "nation": ["n_nationkey", "n_name", "n_regionkey"],
    "region": ["r_regionkey", "r_name"],
}
DYNAMIC = ("orders", "lineitem")    # the tables the refresh functions change
SPARSE_BLOCK, SPARSE_USED = 32, 8   # the initial load's order keys: 8 of every 32
ORDER_DATES = ("1992-01-01", "1998-08-02")      # STARTDATE, ENDDATE - 151 days
CURRENT_DATE = "1995-06-17"
PRIORITIES = ("1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW")
SHIP_MODES = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")


def _plain(table: pa.Table) -> pa.Table:
    """Strings as string, decimals as float64, every column nullable."""
    def plain(kind: pa.DataType) -> pa.DataType:
        if pa.types.is_decimal(kind):
            return pa.float64()
        return pa.string() if kind in (pa.string_view(), pa.large_string()) else kind

    return table.cast(pa.schema([pa.field(f.name, plain(f.type)) for f in table.schema]))   # all nullable


def read_tables(directory: str) -> dict[str, pa.Table]:
    """The tables of :data:`COLUMNS` from ``<directory>/<table>.parquet``."""
    return {name: _plain(pq.read_table(f"{directory}/{name}.parquet", columns=columns)).combine_chunks()
            for name, columns in COLUMNS.items()}


def refreshes(tables: dict[str, pa.Table], count: int, fraction: float = REFRESH_FRACTION, seed: int = 0
              ) -> list[dict[str, pa.Table]]:
    """``count`` refreshes, each RF1 then RF2 as ``{"orders": changelog, "lineitem":
    changelog}`` (the tables' columns and ``diff``): RF1's orders are new
    (:func:`new_orders`), RF2's are orders of the initial load, each deleted once."""
    orders, lineitem = tables["orders"], tables["lineitem"]
    per = max(1, int(len(orders) * fraction))
    rng = np.random.default_rng(seed)
    keys = orders["o_orderkey"].to_numpy()
    doomed = rng.permutation(keys)[: per * count]                # RF2: each an order of the initial load
    fresh = _unused_keys(keys, per * count)
    out = []
    for r in range(count):
        new_orders, new_lines = new_orders_of(tables, fresh[r * per:(r + 1) * per], rng)
        gone = pa.array(doomed[r * per:(r + 1) * per])
        old_orders = orders.filter(pc.is_in(orders["o_orderkey"], gone))
        old_lines = lineitem.filter(pc.is_in(lineitem["l_orderkey"], gone))
        out.append({"orders": _changelog(new_orders, old_orders), "lineitem": _changelog(new_lines, old_lines)})
    return out


def _unused_keys(keys: np.ndarray, n: int) -> np.ndarray:
    """The first ``n`` order keys the sparse initial load leaves free: it uses 8 of every
    32 keys (``key % 32 < 8``), the update sets fill the rest."""
    blocks = -(-n // (SPARSE_BLOCK - SPARSE_USED)) + 1
    candidates = (np.arange(blocks)[:, None] * SPARSE_BLOCK + np.arange(SPARSE_USED, SPARSE_BLOCK)[None, :]).ravel()
    return candidates[~np.isin(candidates, keys)][:n]


def new_orders_of(tables: dict[str, pa.Table], keys: np.ndarray, rng: np.random.Generator
                  ) -> tuple[pa.Table, pa.Table]:
    """New orders under ``keys`` and their lineitems, drawn as the specification's
    population rules draw the initial ones (clause 4.2.3): a customer whose key is not a
    multiple of 3, an order date in [1992-01-01, 1998-08-02], 1 to 7 lineitems each of a
    random part from one of its 4 suppliers, quantity 1-50 at the part's retail price,
    discount 0-10%, tax 0-8%, ship/commit/receipt dates after the order date, return flag
    and line status from the current date 1995-06-17.  The tables' columns of
    :data:`COLUMNS`, in the schemas of ``tables``.

    >>> import pyarrow as pa, numpy as np
    >>> t = {"customer": pa.table({"c_custkey": range(1, 16)}), "part": pa.table({"p_partkey": range(1, 21)}),
    ...      "supplier": pa.table({"s_suppkey": range(1, 11)})}
    >>> orders, lines = new_orders_of(t, np.array([8, 9]), np.random.default_rng(0))
    >>> orders["o_orderkey"].to_pylist(), sorted(set(lines["l_orderkey"].to_pylist()))
    ([8, 9], [8, 9])
    """
    n = len(keys)
    customers, parts = len(tables["customer"]), len(tables["part"])
    suppliers = len(tables["supplier"])
    custkey = rng.integers(1, customers + 1, n)
    custkey = np.where(custkey % 3 == 0, np.maximum(custkey - 1, 1), custkey)
    start, last, current = (np.datetime64(d, "D").astype(np.int64) for d in ORDER_DATES + (CURRENT_DATE,))
    orderdate = rng.integers(start, last + 1, n)
    lines = rng.integers(1, 8, n)
    order_of = np.repeat(np.arange(n), lines)
    m = len(order_of)
    linenumber = np.arange(m) - np.repeat(np.cumsum(lines) - lines, lines) + 1
    partkey = rng.integers(1, parts + 1, m)
    supplier = rng.integers(0, 4, m)
    suppkey = (partkey + supplier * (suppliers // 4 + (partkey - 1) // suppliers)) % suppliers + 1
    retail = (90000 + (partkey // 10) % 20001 + 100 * (partkey % 1000)) / 100.0
    quantity = rng.integers(1, 51, m).astype(np.float64)
    day = orderdate[order_of]
    shipdate = day + rng.integers(1, 122, m)
    commitdate = day + rng.integers(30, 91, m)
    receiptdate = shipdate + rng.integers(1, 31, m)
    returned = np.where(rng.integers(0, 2, m) == 0, "R", "A")
    priority = np.array(PRIORITIES)[rng.integers(0, len(PRIORITIES), n)]
    columns = {
        "o_orderkey": keys, "o_custkey": custkey, "o_orderdate": orderdate.astype("datetime64[D]"),
        "o_orderpriority": priority, "o_shippriority": np.zeros(n, np.int64),
        "l_orderkey": keys[order_of], "l_partkey": partkey, "l_suppkey": suppkey, "l_linenumber": linenumber,
        "l_quantity": quantity, "l_extendedprice": np.round(quantity * retail, 2),
        "l_discount": rng.integers(0, 11, m) / 100.0, "l_tax": rng.integers(0, 9, m) / 100.0,
        "l_returnflag": np.where(receiptdate <= current, returned, "N"),
        "l_linestatus": np.where(shipdate > current, "O", "F"),
        "l_shipdate": shipdate.astype("datetime64[D]"), "l_commitdate": commitdate.astype("datetime64[D]"),
        "l_receiptdate": receiptdate.astype("datetime64[D]"),
        "l_shipmode": np.array(SHIP_MODES)[rng.integers(0, len(SHIP_MODES), m)],
    }
    made = []
    for name in ("orders", "lineitem"):
        like = tables.get(name)
        table = pa.table({c: columns[c] for c in COLUMNS[name]})
        made.append(table if like is None else table.cast(like.schema))
    return made[0], made[1]


def _changelog(added: pa.Table, removed: pa.Table) -> pa.Table:
    return pa.concat_tables([added.append_column("diff", pa.array(np.ones(len(added), np.int64))),
                             removed.append_column("diff", pa.array(-np.ones(len(removed), np.int64)))])


def _day(text: str) -> pa.Scalar:
    return pa.scalar(date.fromisoformat(text), pa.date32())


def _between(column: str, first: str, end: str) -> pc.Expression:
    """``first <= column < end`` for dates."""
    return (pc.field(column) >= _day(first)) & (pc.field(column) < _day(end))


def _revenue() -> pc.Expression:
    return pc.field("l_extendedprice") * (pc.scalar(1.0) - pc.field("l_discount"))


Tables = dict[str, "Stream"]


def _first(view: "Stream", columns: list[str], limit: int, order: list, name: str) -> "Stream":
    """The changelog of the first ``limit`` rows (``columns``) of a view's collection in
    ``order`` (ties by the other columns, ascending): its ``ORDER BY`` / ``LIMIT``, a top-k
    of one group (so one worker keeps the view's rows for it)."""
    ranked = view.select(*columns, "diff", rank_all=pc.scalar(0)).group_by("rank_all") \
                 .top_k(limit, order, name=name)
    return ranked.select(*columns, "diff")


def q1(t: Tables) -> "Stream":
    """Pricing summary report (DELTA = 90 days)."""
    lines = t["lineitem"].filter(pc.field("l_shipdate") <= _day("1998-09-02"), name="Q1Shipped").with_columns(
        disc_price=_revenue(), charge=_revenue() * (pc.field("l_tax") + 1.0))
    return lines.group_by(["l_returnflag", "l_linestatus"]).aggregate(
        [("l_quantity", "sum"), ("l_extendedprice", "sum"), ("disc_price", "sum"), ("charge", "sum"),
         ("l_quantity", "mean"), ("l_extendedprice", "mean"), ("l_discount", "mean"), ([], "count_all")],
        running=True, name="Q1")


def q3(t: Tables) -> "Stream":
    """Shipping priority (SEGMENT = BUILDING, DATE = 1995-03-15)."""
    customers = t["customer"].filter(pc.field("c_mktsegment") == "BUILDING", name="Q3Customers") \
                             .select(o_custkey=pc.field("c_custkey"))
    orders = t["orders"].filter(pc.field("o_orderdate") < _day("1995-03-15"), name="Q3Orders") \
                        .select("o_custkey", "o_orderdate", "o_shippriority", "diff", l_orderkey=pc.field("o_orderkey"))
    lines = t["lineitem"].filter(pc.field("l_shipdate") > _day("1995-03-15"), name="Q3Lines") \
                         .select("l_orderkey", "diff", revenue=_revenue())
    chosen = orders.join(customers, "o_custkey", running=True, name="Q3JoinCustomers")
    grouped = lines.join(chosen, "l_orderkey", running=True, name="Q3JoinOrders").group_by(
        ["l_orderkey", "o_orderdate", "o_shippriority"]).aggregate([("revenue", "sum")], running=True, name="Q3Sums")
    return _first(grouped, ["l_orderkey", "o_orderdate", "o_shippriority", "revenue_sum"], Q3_LIMIT,
                  [("revenue_sum", "descending"), ("o_orderdate", "ascending")], "Q3")


def q5(t: Tables) -> "Stream":
    """Local supplier volume (REGION = ASIA, DATE = 1994-01-01)."""
    region = t["region"].filter(pc.field("r_name") == "ASIA", name="Q5Region") \
                        .select(n_regionkey=pc.field("r_regionkey"))
    nations = t["nation"].join(region, "n_regionkey", running=True, name="Q5Nations") \
                         .select("n_name", nationkey=pc.field("n_nationkey"))
    suppliers = t["supplier"].select(nationkey=pc.field("s_nationkey"), suppkey=pc.field("s_suppkey")) \
                             .join(nations, "nationkey", running=True, name="Q5Suppliers")
    customers = t["customer"].select(o_custkey=pc.field("c_custkey"), nationkey=pc.field("c_nationkey"))
    orders = t["orders"].filter(_between("o_orderdate", "1994-01-01", "1995-01-01"), name="Q5Orders") \
                        .select("o_custkey", "diff", orderkey=pc.field("o_orderkey")) \
                        .join(customers, "o_custkey", running=True, name="Q5Customers")
    lines = t["lineitem"].select("diff", orderkey=pc.field("l_orderkey"), suppkey=pc.field("l_suppkey"),
                                 revenue=_revenue())
    local = lines.join(orders, "orderkey", running=True, name="Q5Orders") \
                 .join(suppliers, ["suppkey", "nationkey"], running=True, name="Q5Local")
    return local.group_by("n_name").aggregate([("revenue", "sum")], running=True, name="Q5")


def q6(t: Tables) -> "Stream":
    """Forecasting revenue change (DATE = 1994-01-01, DISCOUNT = 0.06, QUANTITY = 24)."""
    lines = t["lineitem"].filter(_between("l_shipdate", "1994-01-01", "1995-01-01")
                                 & (pc.field("l_discount") >= 0.05) & (pc.field("l_discount") <= 0.07)
                                 & (pc.field("l_quantity") < 24), name="Q6Lines")
    return lines.select("diff", all=pc.scalar(1), revenue=pc.field("l_extendedprice") * pc.field("l_discount")) \
                .group_by("all").aggregate([("revenue", "sum")], running=True, name="Q6")


def q10(t: Tables) -> "Stream":
    """Returned item reporting (DATE = 1993-10-01)."""
    nations = t["nation"].select("n_name", c_nationkey=pc.field("n_nationkey"))
    customers = t["customer"].join(nations, "c_nationkey", running=True, name="Q10Nations") \
                             .select("c_name", "c_acctbal", "c_phone", "n_name", "c_address", "c_comment",
                                     o_custkey=pc.field("c_custkey"))
    orders = t["orders"].filter(_between("o_orderdate", "1993-10-01", "1994-01-01"), name="Q10Orders") \
                        .select("o_custkey", "diff", l_orderkey=pc.field("o_orderkey"))
    lines = t["lineitem"].filter(pc.field("l_returnflag") == "R", name="Q10Returned") \
                         .select("l_orderkey", "diff", revenue=_revenue())
    joined = lines.join(orders, "l_orderkey", running=True, name="Q10Orders") \
                  .join(customers, "o_custkey", running=True, name="Q10Customers")
    columns = ["o_custkey", "c_name", "c_acctbal", "c_phone", "n_name", "c_address", "c_comment"]
    grouped = joined.group_by(columns).aggregate([("revenue", "sum")], running=True, name="Q10Sums")
    return _first(grouped, [*columns, "revenue_sum"], Q10_LIMIT, [("revenue_sum", "descending")], "Q10")


def q12(t: Tables) -> "Stream":
    """Shipping modes and order priority (MAIL, SHIP; DATE = 1994-01-01)."""
    lines = t["lineitem"].filter(pc.is_in(pc.field("l_shipmode"), pa.array(["MAIL", "SHIP"]))
                                 & (pc.field("l_commitdate") < pc.field("l_receiptdate"))
                                 & (pc.field("l_shipdate") < pc.field("l_commitdate"))
                                 & _between("l_receiptdate", "1994-01-01", "1995-01-01"), name="Q12Lines") \
                         .select("l_shipmode", "diff", o_orderkey=pc.field("l_orderkey"))
    urgent = pc.is_in(pc.field("o_orderpriority"), pa.array(["1-URGENT", "2-HIGH"]))
    orders = t["orders"].select("o_orderkey", "diff", high=pc.if_else(urgent, 1, 0), low=pc.if_else(urgent, 0, 1))
    return lines.join(orders, "o_orderkey", running=True, name="Q12Join").group_by("l_shipmode").aggregate(
        [("high", "sum"), ("low", "sum")], running=True, name="Q12")


def q14(t: Tables) -> "Stream":
    """Promotion effect (DATE = 1995-09-01): 100 * promo revenue / revenue."""
    lines = t["lineitem"].filter(_between("l_shipdate", "1995-09-01", "1995-10-01"), name="Q14Lines") \
                         .select("diff", p_partkey=pc.field("l_partkey"), revenue=_revenue())
    parts = t["part"].select("p_partkey", promo=pc.starts_with(pc.field("p_type"), "PROMO"))
    joined = lines.join(parts, "p_partkey", running=True, name="Q14Join").select(
        "diff", "revenue", all=pc.scalar(1), promo_revenue=pc.if_else(pc.field("promo"), pc.field("revenue"), 0.0))
    sums = joined.group_by("all").aggregate([("promo_revenue", "sum"), ("revenue", "sum")], running=True,
                                             name="Q14Sums")
    return sums.select("diff", promo_revenue=pc.field("promo_revenue_sum") * 100.0 / pc.field("revenue_sum"))


TPCH_QUERIES: dict[str, Callable[[Tables], Any]] = {"q1": q1, "q3": q3, "q5": q5, "q6": q6, "q10": q10,
                                                    "q12": q12, "q14": q14}
