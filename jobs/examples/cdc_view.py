"""A change feed (CDC) kept as a live view: balance per region, from a stream of customer changes.

The source is what a CDC tool (Debezium, a database's change stream...) lands in a
folder: JSON files of change records ``customer_id, op, lsn, region_id, balance``
(``op`` is ``insert``, ``update`` or ``delete``; ``lsn`` orders a customer's changes).
The view: the current row of every customer (``stream.upsert``: SCD type 1, deletes
withdraw), joined with a dimension table of regions, aggregated per region (customers,
total balance) -- kept incrementally, each micro-batch an epoch, exactly once.

The plumbing is the hand-assembled route: ``readStream.json`` -> ``writeStream.format("timely")``
-> a long-running ``ts.spark.run`` following that log with a checkpoint (:func:`follow`)
-> an output log -> ``readStream.format("timely")`` (a streaming DataFrame of the
view's changes, ``diff`` column included).  :func:`view` is the dataflow alone, the
``build(scope, changes)`` of that route.  At the end the view is read back as a
DataFrame and checked against pandas on the change files.

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
#: The view's changes, as the output log holds them.
VIEW = pa.schema([("region", pa.string()), ("customers", pa.int64()), ("balance", pa.int64()),
                  ("diff", pa.int64())])
VIEW_STREAM = "time long, worker long, region string, customers long, balance long, diff long"
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


def follow(feed_log: str, view_log: str):
    """The timely side: follow the feed log, keep the view, capture its changes."""
    def work(worker):
        writer = ts.capture.ParquetEventWriter(view_log, worker=worker.index, peers=worker.peers, schema=VIEW)
        def build(scope):
            changes = view(scope, ts.capture.follow(feed_log, scope))
            changes.capture_into(writer)
            return changes.probe()

        probe = worker.dataflow(build)
        worker.step_while(lambda: not probe.done())
        writer.close()
    return work


def run(spark, source: Path, workdir: Path, workers: int = 2, files: int = 0):
    """The whole route until the feed (``files`` files) is read, then closed: the view as a
    DataFrame of ``(region, customers, balance)``."""
    from pyspark.sql import functions as F

    feed_log, view_log = str(workdir / "feed"), str(workdir / "view")
    ts.spark.register(spark)
    records = spark.readStream.schema(CHANGES).option("maxFilesPerTrigger", 1).json(str(source))
    feed = (records.select("customer_id", "lsn", "region_id", "balance", (F.col("op") == "delete").alias("deleted"))
            .coalesce(1).writeStream.format("timely").option("checkpointLocation", str(workdir / "ckpt-feed"))
            .start(feed_log))
    failed: list = []

    def timely() -> None:
        try:
            ts.spark.run(spark, follow(feed_log, view_log), workers=workers, checkpoint=str(workdir / "ckpt-view"),
                         timeout=600)
        except Exception as exc:                          # raised below, in the caller's thread
            failed.append(exc)

    job = threading.Thread(target=timely)
    job.start()
    changes = spark.readStream.format("timely").schema(VIEW_STREAM).load(view_log)
    out = (changes.writeStream.format("memory").queryName("cdc_view_changes")
           .option("checkpointLocation", str(workdir / "ckpt-out")).start())
    try:
        while len(list(source.glob("*.json"))) < files and not failed:
            time.sleep(0.2)
        feed.processAllAvailable()
    finally:
        feed.stop()
        ts.spark.close_sink_log(feed_log)                 # the timely job ends once it has read everything
        job.join()
        if not failed:
            out.processAllAvailable()
        out.stop()
    if failed:
        raise failed[0]
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
