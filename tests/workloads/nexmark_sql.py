"""The Nexmark queries in SQL for DuckDB, written from their definitions (the independent
check of the timely and Spark answers), and the comparison of answers as multisets."""

import duckdb
import pyarrow as pa

WINDOW_MS, SLIDE_MS, SLIDES = 10_000, 2_000, 5

MS, PMS, AMS = (f"epoch_ms({t}date_time::TIMESTAMP)" for t in ("", "p.", "a."))   # event time in ms

_WINNING = """SELECT a.id, a.{by}, max(b.price) AS final FROM auctions a JOIN bids b
    ON a.id = b.auction AND b.date_time BETWEEN a.date_time AND a.expires GROUP BY a.id, a.{by}"""

SQL = {
    "q0": "SELECT auction, bidder, price, channel, url, date_time FROM bids",
    "q1": "SELECT auction, bidder, date_time, price * 0.908::DOUBLE AS price FROM bids",
    "q2": "SELECT auction, price FROM bids WHERE auction % 123 = 0",
    "q3": """SELECT p.name, p.city, p.state, a.id FROM auctions a JOIN people p ON a.seller = p.id
             WHERE a.category = 10 AND p.state IN ('OR', 'ID', 'CA')""",
    "q4": f"SELECT category, avg(final) AS price_max_mean FROM ({_WINNING.format(by='category')}) GROUP BY category",
    "q5": f"""WITH w AS (SELECT auction, ({MS} // {SLIDE_MS}) * {SLIDE_MS} - i * {SLIDE_MS} AS ws
                         FROM bids, range({SLIDES}) t(i)),
                   c AS (SELECT ws, auction, count(*) AS n FROM w GROUP BY ws, auction),
                   m AS (SELECT ws, max(n) AS n FROM c GROUP BY ws)
              SELECT c.ws AS window_start, c.ws + {WINDOW_MS} AS window_end, c.auction, c.n AS count_all
              FROM c JOIN m ON c.ws = m.ws AND c.n = m.n""",
    "q6": f"""SELECT seller, avg(final) AS price_max_mean FROM (
                SELECT seller, final, row_number() OVER (PARTITION BY seller ORDER BY expires DESC, id DESC) AS n
                FROM ({_WINNING.format(by='seller, a.expires')})) WHERE n <= 10 GROUP BY seller""",
    "q7": f"""WITH b AS (SELECT *, ({MS} // {WINDOW_MS}) * {WINDOW_MS} AS ws FROM bids),
                   m AS (SELECT ws, max(price) AS price FROM b GROUP BY ws)
              SELECT b.auction, b.bidder, b.price, b.date_time, b.ws AS window_start
              FROM b JOIN m ON b.ws = m.ws AND b.price = m.price""",
    "q8": f"""SELECT DISTINCT p.id, p.name, ({PMS} // {WINDOW_MS}) * {WINDOW_MS} AS window_start
              FROM people p JOIN auctions a ON p.id = a.seller
               AND {PMS} // {WINDOW_MS} = {AMS} // {WINDOW_MS}""",
}


def duckdb_answer(query: str, people: pa.Table, auctions: pa.Table, bids: pa.Table) -> pa.Table:
    con = duckdb.connect()
    try:
        for name, table in (("people", people), ("auctions", auctions), ("bids", bids)):
            con.register(name, table)
        return con.sql(SQL[query]).to_arrow_table()
    finally:
        con.close()


def rows(table: pa.Table, columns: list) -> list:
    """The table's rows over ``columns`` as sorted tuples: timestamps as epoch
    milliseconds, floats to 9 significant digits (a mean is summed in any order)."""
    out = []
    for name in columns:
        column = table[name]
        if pa.types.is_timestamp(column.type):
            column = column.cast(pa.timestamp("ms", column.type.tz)).cast(pa.int64())
        values = column.to_pylist()
        if pa.types.is_floating(column.type):
            values = [float(f"{v:.9g}") for v in values]
        out.append(values)
    return sorted(zip(*out)) if out else []
