"""A timely job on Spark barrier workers that captures its output epochs to Parquet.

Each worker reads a simulated stream of page views, epoch by epoch, keeps the
views of known pages, and captures them as a Parquet event log (one directory per
worker) that any Spark job can read -- complete epochs only -- with
``ts.spark.read_event_log``.  ``--open`` leaves the last epoch unfinished, as a
running job would: its views are in the log already, but not reported.

    spark-submit jobs/examples/stream_to_parquet.py --out /tmp/views-log --epochs 5
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import timely_spark as ts
from timely_spark.capture import ParquetEventWriter

PAGES = ["home", "search", "cart", "checkout", "help"]


def capture_views(out: str, epochs: int, views: int, leave_open: bool):
    def work(worker):
        writer = ParquetEventWriter(out, worker.index, worker.peers, flush_seconds=0.0)
        rng = random.Random(worker.index)

        def build(scope):
            inp, clicks = scope.new_input("Views")
            kept = clicks.filter(lambda page: page in PAGES).map(lambda page: {"page": page})
            kept.capture_into(writer)
            return inp, kept.probe()

        index = worker.next_dataflow_index()
        inp, probe = worker.dataflow(build)
        for epoch in range(epochs):
            inp.send_batch([rng.choice(PAGES) for _ in range(views)])
            if leave_open and epoch == epochs - 1:
                break                          # the last epoch stays open
            inp.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(inp.time), timeout=600)
        if leave_open:
            for _ in range(20):
                worker.step()
            writer.flush()
            worker.drop_dataflow(index)    # stop here, as if the job were still running
            return "open"
        inp.close()
        worker.step_while(lambda: not probe.done(), timeout=600)
        writer.close()
        return "closed"

    return work


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="out/views-log")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--views", type=int, default=1000, help="views per epoch per worker")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--open", action="store_true", help="leave the last epoch unfinished")
    parser.add_argument("--master")
    args = parser.parse_args()

    spark = ts.spark.get_session("timely stream to parquet", master=args.master)
    out = str(Path(args.out).resolve())
    if Path(out).exists():
        import shutil

        shutil.rmtree(out)
    start = time.perf_counter()
    ts.spark.run(spark, capture_views(out, args.epochs, args.views, args.open), workers=args.workers)
    elapsed = time.perf_counter() - start
    ts.spark.read_event_log(spark, out).createOrReplaceTempView("views")
    result = spark.sql("SELECT time AS epoch, count(*) AS views FROM views GROUP BY time ORDER BY time")
    for row in result.collect():
        print(f"epoch {row['epoch']}: {row['views']} views")
    print(f"{args.workers} timely workers captured {args.epochs} epochs in {elapsed:.1f} s; "
          f"frontier {ts.spark.event_log_frontier(spark, out).elements()}; log at {out}")


if __name__ == "__main__":
    main()
