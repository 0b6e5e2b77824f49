"""Capturing to a Parquet event log, next to DataFrame.write.parquet of the same rows.

2,000,000 records {"key", "value"} in 200 epochs: (a) captured by a timely dataflow
into a Parquet event log (1 worker), then read back with Spark; (b) the same rows
written with Spark's ``DataFrame.write.parquet`` (local[2]).  Prints records/s.

    python jobs/bench_capture.py [--records N] [--epochs N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import timely_spark as ts
from timely_spark.capture import ParquetEventWriter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--epochs", type=int, default=200)
    args = parser.parse_args()
    per_epoch = args.records // args.epochs
    batches = [[{"key": i % 1000, "value": float(i)} for i in range(e * per_epoch, (e + 1) * per_epoch)]
               for e in range(args.epochs)]
    work_dir = Path(tempfile.mkdtemp(prefix="bench-capture-"))

    def capture(worker):
        writer = ParquetEventWriter(work_dir / "log", worker.index, worker.peers, flush_seconds=0.5)

        def build(scope):
            inp, stream = scope.new_input()
            stream.capture_into(writer)
            return inp, stream.probe()

        inp, probe = worker.dataflow(build)
        for epoch, batch in enumerate(batches):
            inp.send_batch(batch)
            inp.advance_to(epoch + 1)
            worker.step()
        inp.close()
        worker.step_while(lambda: not probe.done(), timeout=600)
        writer.close()

    start = time.perf_counter()
    ts.execute(capture)
    t_capture = time.perf_counter() - start

    conf_dir = os.environ.get("SPARK_CONF_DIR") or str(Path(__file__).resolve().parent.parent / "conf")
    spark = ts.spark.get_session("bench capture", master="local[2]", conf_dir=conf_dir)
    start = time.perf_counter()
    read_back = ts.spark.read_event_log(spark, work_dir / "log").count()
    t_read = time.perf_counter() - start
    assert read_back == per_epoch * args.epochs, f"read back {read_back} rows"

    rows = [(e, r["key"], r["value"]) for e, batch in enumerate(batches) for r in batch]
    frame = spark.createDataFrame(rows, "time long, key long, value double").cache()
    frame.count()
    start = time.perf_counter()
    frame.write.parquet(str(work_dir / "spark"))
    t_spark = time.perf_counter() - start
    spark.stop()
    shutil.rmtree(work_dir)

    n = per_epoch * args.epochs
    print(f"{n:,} records in {args.epochs} epochs")
    print(f"(a) timely capture to a Parquet event log  {n / t_capture:12,.0f} records/s   ({t_capture:.2f} s)")
    print(f"    read back with Spark (complete only)   {n / t_read:12,.0f} records/s   ({t_read:.2f} s)")
    print(f"(b) DataFrame.write.parquet                {n / t_spark:12,.0f} records/s   ({t_spark:.2f} s)")
    print(f"capture / Spark write = {t_spark / t_capture:.2f} (target >= 1)")


if __name__ == "__main__":
    main()
