"""A "last 24 hours" view with a temporal filter (``valid_during``): epochs are hours; a
sale counts toward the running total of its shop from its hour until 24 hours later,
when the engine withdraws it by itself -- no job re-reads old data.  Checked against the
total from scratch at every hour.

    python jobs/examples/last_24_hours.py
"""

import argparse

import pyarrow as pa
import pyarrow.compute as pc

from timely_spark.testing import run_epochs

HOURS = 30
SALES = {0: [("north", 10)], 5: [("north", 3), ("south", 7)], 20: [("south", 1)], 26: [("north", 2)]}


def last_day(scope, sales):
    windowed = sales.with_columns(until=pc.field("hour") + 24).valid_during("hour", "until")
    return windowed.group_by("shop").aggregate([("amount", "sum")], running=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2, help="worker threads")
    args = parser.parse_args()
    batches = [[pa.RecordBatch.from_pylist([dict(shop=s, amount=a, hour=h) for s, a in SALES.get(h, [])],
                                           schema=pa.schema([("shop", pa.string()), ("amount", pa.int64()),
                                                             ("hour", pa.int64())]))] for h in range(HOURS)]
    run = run_epochs(last_day, batches, threads=args.threads)
    for hour in range(HOURS):
        want = {}
        for h, sales in SALES.items():
            for shop, amount in sales:
                if h <= hour < h + 24:
                    want[shop] = want.get(shop, 0) + amount
        assert {r["shop"]: r["amount_sum"] for r in run.collection(hour).to_pylist()} == want, hour
        if hour in run.by_time:
            print(hour, sorted(want.items()))
