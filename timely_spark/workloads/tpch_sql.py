"""TPC-H Q1, Q3, Q5, Q6, Q10, Q12, Q14 in SQL, from the specification with the validation
substitution parameters (ORDER BY / LIMIT where it picks rows: Q3, Q10, with the view's
tie-breaks), named as the views name their columns: the independent
check (DuckDB; a test and benchmark dependency, imported only when called) and the
recompute that Spark and DuckDB do in the benchmark; tables refreshed by applying the
changelogs.

>>> sorted(SQL) == sorted(__import__("timely_spark.workloads.tpch", fromlist=["x"]).TPCH_QUERIES)
True
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

REVENUE = "l_extendedprice * (1 - l_discount)"

SQL = {
    "q1": f"""SELECT l_returnflag, l_linestatus, sum(l_quantity) AS l_quantity_sum,
                     sum(l_extendedprice) AS l_extendedprice_sum, sum({REVENUE}) AS disc_price_sum,
                     sum({REVENUE} * (1 + l_tax)) AS charge_sum, avg(l_quantity) AS l_quantity_mean,
                     avg(l_extendedprice) AS l_extendedprice_mean, avg(l_discount) AS l_discount_mean,
                     count(*) AS count_all
              FROM lineitem WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL 90 DAY
              GROUP BY l_returnflag, l_linestatus""",
    "q3": f"""SELECT l_orderkey, o_orderdate, o_shippriority, sum({REVENUE}) AS revenue_sum
              FROM customer, orders, lineitem
              WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
                AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'
              GROUP BY l_orderkey, o_orderdate, o_shippriority
              ORDER BY revenue_sum DESC, o_orderdate, l_orderkey, o_shippriority LIMIT 10""",
    "q5": f"""SELECT n_name, sum({REVENUE}) AS revenue_sum
              FROM customer, orders, lineitem, supplier, nation, region
              WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND l_suppkey = s_suppkey
                AND c_nationkey = s_nationkey AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey
                AND r_name = 'ASIA' AND o_orderdate >= DATE '1994-01-01'
                AND o_orderdate < DATE '1994-01-01' + INTERVAL 1 YEAR
              GROUP BY n_name""",
    "q6": """SELECT sum(l_extendedprice * l_discount) AS revenue_sum FROM lineitem
             WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1994-01-01' + INTERVAL 1 YEAR
               AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24""",
    "q10": f"""SELECT c_custkey AS o_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment,
                      sum({REVENUE}) AS revenue_sum
               FROM customer, orders, lineitem, nation
               WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND o_orderdate >= DATE '1993-10-01'
                 AND o_orderdate < DATE '1993-10-01' + INTERVAL 3 MONTH AND l_returnflag = 'R'
                 AND c_nationkey = n_nationkey
               GROUP BY c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment
               ORDER BY revenue_sum DESC, o_custkey LIMIT 20""",
    "q12": """SELECT l_shipmode,
                     sum(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH' THEN 1 ELSE 0 END)
                         AS high_sum,
                     sum(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH' THEN 1 ELSE 0 END)
                         AS low_sum
              FROM orders, lineitem
              WHERE o_orderkey = l_orderkey AND l_shipmode IN ('MAIL', 'SHIP') AND l_commitdate < l_receiptdate
                AND l_shipdate < l_commitdate AND l_receiptdate >= DATE '1994-01-01'
                AND l_receiptdate < DATE '1994-01-01' + INTERVAL 1 YEAR
              GROUP BY l_shipmode""",
    "q14": f"""SELECT 100.00 * sum(CASE WHEN p_type LIKE 'PROMO%' THEN {REVENUE} ELSE 0 END) / sum({REVENUE})
                      AS promo_revenue
               FROM lineitem, part
               WHERE l_partkey = p_partkey AND l_shipdate >= DATE '1995-09-01'
                 AND l_shipdate < DATE '1995-09-01' + INTERVAL 1 MONTH""",
}


def refreshed(tables: dict[str, pa.Table], refreshes: list, upto: int) -> dict[str, pa.Table]:
    """The tables after the first ``upto`` refreshes: RF1's rows added, RF2's orders and
    their lineitems deleted."""
    out = dict(tables)
    for name, key in (("orders", "o_orderkey"), ("lineitem", "l_orderkey")):
        changes = [r[name] for r in refreshes[:upto]]
        if not changes:
            continue
        log = pa.concat_tables(changes)
        added = log.filter(pc.equal(log["diff"], 1)).drop_columns(["diff"])
        gone = log.filter(pc.equal(log["diff"], -1))[key]
        table = pa.concat_tables([tables[name], added])
        out[name] = table.filter(pc.invert(pc.is_in(table[key], gone)))
    return out


def duckdb_answer(query: str, tables: dict) -> pa.Table:
    """DuckDB's answer to ``query`` on ``tables`` (pyarrow Tables by name)."""
    import duckdb

    con = duckdb.connect()
    try:
        for name, table in tables.items():
            con.register(name, table)
        return con.sql(SQL[query]).to_arrow_table()
    finally:
        con.close()


def same(left: pa.Table, right: pa.Table, columns: list) -> bool:
    """Equal as multisets over ``columns``, floats within 1e-9 (relative)."""
    def rows(table: pa.Table) -> list[Any]:
        return sorted(zip(*(table[c].to_pylist() for c in columns)), key=lambda r: [str(v) for v in r])

    a, b = rows(left), rows(right)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            if isinstance(u, float) or isinstance(v, float):
                if u is None or v is None or not math.isclose(float(u), float(v), rel_tol=1e-9, abs_tol=1e-6):
                    return False
            elif u != v:
                return False
    return True

