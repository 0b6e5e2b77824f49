"""A change feed (CDC) kept as a live view: balance per region, from a stream of customer changes.

The source is what a CDC tool (Debezium, a database's change stream...) lands in a
folder: JSON files of change records ``customer_id, op, lsn, region_id, balance``
(``op`` is ``insert``, ``update`` or ``delete``; ``lsn`` orders a customer's changes).
The view: the current row of every customer (``stream.upsert``: SCD type 1, deletes
withdraw), joined with a dimension table of regions, aggregated per region (customers,
total balance) -- kept incrementally, each micro-batch an epoch, exactly once.

One call runs it: ``ts.spark.stream(changes, view, VIEW, checkpoint=...)`` (the input
query, a long-running barrier job keeping the view with snapshots, and its changes as a
streaming DataFrame, ``diff`` column included).  :func:`view` is the dataflow alone.  At
the end the view is read back as a DataFrame and checked against pandas on the change
files.

    spark-submit jobs/examples/cdc_view.py --files 20 --changes 500
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa

import timely_spark as ts

#: The change records (what lands in the folder) and what the sink passes on.
CHANGES = "customer_id long, op string, lsn long, region_id long, balance long"
#: The view's changes (a changelog: ``diff`` last).
VIEW_DDL = "region string, customers long, balance long, diff long"
VIEW = pa.schema([("region", pa.string()), ("customers", pa.int64()), ("balance", pa.int64()),
                  ("diff", pa.int64())])
REGIONS = pa.table({"region_id": [0, 1, 2, 3], "region": ["north", "south", "east", "west"]})


def view(scope, changes, regions: pa.Table = REGIONS):
    """The dataflow: change records in, the changelog of ``(region, customers, balance)`` out."""
    current = changes.upsert("customer_id", sequence_by="lsn", delete="deleted")       # +1/-1 per customer
    placed = current.flat_map(lambda rb: pa.Table.from_batches([rb]).join(regions, "region_id").to_batches())
    totals = placed.group_by("region").aggregate([([], "count_all"), ("balance", "sum")], running=True)
    return totals.map(lambda rb: pa.record_batch([rb.column(c) for c in ("region", "count_all", "balance_sum",
                                                                             "diff")], schema=VIEW))


def write_changes(folder: Path, files: int, per_file: int, customers: int, seed: int = 3,
                  interval: float = 0.0) -> None:
    """``files`` JSON files of ``per_file`` random changes each, ``lsn`` increasing."""
    rng, alive, lsn = random.Random(seed), set(), 0
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        lines = []
        for _ in range(per_file):
            key = rng.randrange(customers)
            op = "delete" if key in alive and rng.random() < 0.2 else ("update" if key in alive else "insert")
            (alive.discard if op == "delete" else alive.add)(key)
            lsn += 1
            lines.append(json.dumps({"customer_id": key, "op": op, "lsn": lsn, "region_id": rng.randrange(4),
                                     "balance": rng.randrange(1000)}))
        tmp = folder / f".changes-{f:05d}.json"
        tmp.write_text("\n".join(lines) + "\n")
        os.utime(tmp, (1_700_000_000 + f, 1_700_000_000 + f))      # the file source takes files in mtime order
        tmp.rename(folder / f"changes-{f:05d}.json")
        time.sleep(interval)


def run(spark, source: Path, workdir: Path, workers: int = 2, files: int = 1):
    """The view kept from the first ``files`` change files (one micro-batch each): a
    DataFrame of ``(region, customers, balance)``."""
    from pyspark.sql import functions as F

    records = spark.readStream.schema(CHANGES).option("maxFilesPerTrigger", 1).json(str(source))
    feed = records.select("customer_id", "lsn", "region_id", "balance", (F.col("op") == "delete").alias("deleted"))
    with ts.spark.stream(feed, view, VIEW_DDL, checkpoint=str(workdir / "pipeline"), workers=workers) as pipeline:
        out = pipeline.start_output(pipeline.df.writeStream.format("memory").queryName("cdc_view_changes")
                                    .option("checkpointLocation", str(workdir / "ckpt-out")))
        pipeline.await_epoch(files - 1)                   # a micro-batch is an epoch
        out.processAllAvailable()
    changelog = spark.table("cdc_view_changes")
    return (changelog.groupBy("region", "customers", "balance").agg(F.sum("diff").alias("n"))
            .where("n != 0").drop("n"))


def expected(source: Path):
    """The view from scratch, in pandas: each customer's last change by ``lsn``, deletes dropped."""
    import pandas as pd

    changes = pd.concat([pd.read_json(p, lines=True) for p in sorted(source.glob("*.json"))])
    last = changes.sort_values("lsn").drop_duplicates("customer_id", keep="last")
    live = last[last["op"] != "delete"].merge(REGIONS.to_pandas(), on="region_id")
    return live.groupby("region").agg(customers=("customer_id", "size"), balance=("balance", "sum")).reset_index()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=20, help="change files (one micro-batch each)")
    parser.add_argument("--changes", type=int, default=500, help="changes per file")
    parser.add_argument("--customers", type=int, default=2000, help="distinct customer ids")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between files")
    parser.add_argument("--master", default="local[4]", help="two timely workers and two query tasks")
    args = parser.parse_args()
    spark = ts.spark.get_session("cdc view", master=args.master)
    spark.sparkContext.setLogLevel("ERROR")
    workdir = Path(tempfile.mkdtemp(prefix="cdc_view-"))
    try:
        source = workdir / "input"
        writer = threading.Thread(target=write_changes, args=(source, args.files, args.changes, args.customers),
                                  kwargs={"interval": args.interval})
        writer.start()
        got = run(spark, source, workdir, files=args.files).toPandas().sort_values("region").reset_index(drop=True)
        writer.join()
        want = expected(source)
        print(got.to_string(index=False))
        same = got.astype({"customers": "int64", "balance": "int64"}).equals(want.astype(
            {"customers": "int64", "balance": "int64"}))
        print(f"{args.files * args.changes} changes in {args.files} files; the view equals pandas on the change "
              f"files: {'yes' if same else 'NO'}")
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
