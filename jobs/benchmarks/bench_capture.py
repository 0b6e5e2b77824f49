"""Capturing to a Parquet event log and reading it with Spark, next to Spark's own Parquet.

2,000,000 records {"key", "value"} in 200 epochs:

(a) captured by a timely dataflow into a Parquet event log (1 worker), next to the same
    rows written with Spark's ``DataFrame.write.parquet`` (local[2]);
(b) read back, warm, in the same session: ``spark.read.format("timely")`` (complete times
    only) next to ``spark.read.parquet`` of the rows Spark wrote -- every row and column
    materialized (the ``noop`` sink), median of ``--repeats`` runs; and, as the ceiling
    of any Python data source, one that reads nothing and yields the same number of rows
    from memory as Arrow batches (what PySpark's Python Data Source API costs by itself);
(c) the delay from a time becoming complete in a running timely job (its probe passes;
    the writer flushes on completion, ``flush_seconds=0``) to its rows arriving in a
    ``readStream.format("timely")`` micro-batch (``foreachBatch``, default trigger),
    median over ``--stream-epochs`` epochs.

    python jobs/benchmarks/bench_capture.py [--records N] [--epochs N] [--repeats N] [--stream-epochs N]

``--many-files N`` measures only a log of N tiny part files (one record and one epoch
each): the index's first scan, then ``ts.spark.read_event_log`` (its load, which checks
every file) and two ``count()`` actions on it, then a new load and count of the same
files -- what each action costs in opening files rather than in rows.

    python jobs/benchmarks/bench_capture.py --many-files 5000
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

import timely_spark as ts
from timely_spark.capture import ParquetEventWriter


def captured_input(worker, path: Path, flush_seconds: float):
    """``(writer, input, probe)``: a dataflow whose input is captured into the log at ``path``."""
    writer = ParquetEventWriter(path, worker.index, worker.peers, flush_seconds=flush_seconds)

    def build(scope):
        inp, stream = scope.new_input()
        stream.capture_into(writer)
        return inp, stream.probe()

    inp, probe = worker.dataflow(build)
    return writer, inp, probe


def capture(batches: list, path: Path) -> float:
    """Seconds to capture ``batches`` (one per epoch) into an event log at ``path``."""
    def work(worker):
        writer, inp, probe = captured_input(worker, path, flush_seconds=0.5)
        for epoch, batch in enumerate(batches):
            inp.send_batch(batch)
            inp.advance_to(epoch + 1)
            worker.step()
        inp.close()
        worker.step_while(lambda: not probe.done(), timeout=600)
        writer.close()

    start = time.perf_counter()
    ts.execute(work)
    return time.perf_counter() - start


def timed_scan(frame, repeats: int) -> float:
    """Median seconds to materialize every row and column of ``frame`` (after one warm-up)."""
    frame.write.format("noop").mode("overwrite").save()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        frame.write.format("noop").mode("overwrite").save()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class InMemoryRows(DataSource):
    """``format("in_memory_rows")``: ``rows`` rows of the event log's schema made in
    memory, in 2 partitions -- a Python data source with no I/O at all."""

    @classmethod
    def name(cls):
        return "in_memory_rows"

    def schema(self):
        return "time long, worker long, key long, value double"

    def reader(self, schema):
        return InMemoryReader(int(self.options["rows"]))


class InMemoryReader(DataSourceReader):
    def __init__(self, rows: int):
        self.rows = rows

    def partitions(self):
        return [InputPartition(self.rows // 2), InputPartition(self.rows - self.rows // 2)]

    def read(self, partition):
        n = partition.value
        ids = np.arange(n, dtype=np.int64)
        table = pa.table({"time": ids // 10_000, "worker": np.zeros(n, np.int64), "key": ids % 1000,
                          "value": ids.astype(np.float64)})
        yield from table.to_batches(65_536)


def stream_delays(spark, path: Path, epochs: int, rows: int, interval: float) -> list[float]:
    """Seconds from each epoch's completion in a 2-worker job to its rows in a micro-batch."""
    completed: dict[int, float] = {}
    arrived: dict[int, float] = {}
    counts: dict[int, int] = {}

    def work(worker):
        writer, inp, probe = captured_input(worker, path, flush_seconds=0.0)
        for epoch in range(epochs):
            inp.send_batch([{"key": k, "value": float(epoch)} for k in range(rows)])
            inp.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(inp.time), timeout=60)
            if worker.index == 0:
                completed[epoch] = time.perf_counter()
            deadline = time.perf_counter() + interval
            while time.perf_counter() < deadline:
                worker.step()
        inp.close()
        worker.step_while(lambda: not probe.done(), timeout=60)
        writer.close()

    def batch(frame, _batch_id):
        got = frame.groupBy("time").count().collect()
        now = time.perf_counter()
        for r in got:
            arrived.setdefault(r["time"], now)
            counts[r["time"]] = counts.get(r["time"], 0) + r["count"]

    query = (spark.readStream.format("timely").schema("time long, worker long, key long, value double")
             .load(str(path)).writeStream.foreachBatch(batch)
             .option("checkpointLocation", str(path) + "-checkpoint").start())     # before the job starts
    job = threading.Thread(target=ts.execute, args=(work,), kwargs={"threads": 2, "timeout": 600}, daemon=True)
    job.start()
    try:
        job.join(timeout=600)
        deadline = time.monotonic() + 60
        while len(arrived) < epochs and time.monotonic() < deadline:
            query.processAllAvailable()
    finally:
        query.stop()
    assert counts == {e: 2 * rows for e in range(epochs)}, f"rows per epoch: {counts}"
    return [arrived[e] - completed[e] for e in range(epochs)]


def many_files(n: int) -> None:
    """Seconds to index, load and count a log of ``n`` one-record part files."""
    from timely_spark.capture import LogIndex, Messages, Progress

    work_dir = Path(tempfile.mkdtemp(prefix="bench-capture-"))
    try:
        path = work_dir / "log"
        writer = ParquetEventWriter(path, flush_seconds=0.0)
        for e in range(n):
            writer.push(Messages(e, [{"k": e}]))
            writer.push(Progress([(e, -1), (e + 1, 1)]))
        writer.close()
        start = time.perf_counter()
        LogIndex(path).snapshot()
        print(f"{n:,} part files: the index's first scan {time.perf_counter() - start:.2f} s")
        spark = ts.spark.get_session("bench capture", master="local[2]")
        for attempt in ("first", "again"):
            start = time.perf_counter()
            frame = ts.spark.read_event_log(spark, path)
            loaded = time.perf_counter()
            assert frame.count() == n
            counted = time.perf_counter()
            frame.count()
            print(f"  {attempt} read_event_log: load {loaded - start:.2f} s, first count() {counted - loaded:.2f} s, "
                  f"second count() {time.perf_counter() - counted:.2f} s")
        spark.stop()
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5, help="timed runs of each read (median)")
    parser.add_argument("--stream-epochs", type=int, default=20)
    parser.add_argument("--stream-rows", type=int, default=1000, help="records per worker and epoch in (c)")
    parser.add_argument("--stream-interval", type=float, default=1.0, help="seconds between epochs in (c)")
    parser.add_argument("--many-files", type=int, default=0, metavar="N",
                        help="only measure a log of N one-record part files (index, load, count)")
    args = parser.parse_args()
    if args.many_files:
        many_files(args.many_files)
        return
    per_epoch = args.records // args.epochs
    n = per_epoch * args.epochs
    batches = [[{"key": i % 1000, "value": float(i)} for i in range(e * per_epoch, (e + 1) * per_epoch)]
               for e in range(args.epochs)]
    work_dir = Path(tempfile.mkdtemp(prefix="bench-capture-"))
    try:
        t_capture = capture(batches, work_dir / "log")

        spark = ts.spark.get_session("bench capture", master="local[2]")
        rows = [(e, r["key"], r["value"]) for e, batch in enumerate(batches) for r in batch]
        frame = spark.createDataFrame(rows, "time long, key long, value double").cache()
        frame.count()
        start = time.perf_counter()
        frame.write.parquet(str(work_dir / "spark"))
        t_write = time.perf_counter() - start
        frame.unpersist()
        del rows

        timely = spark.read.format("timely").load(str(work_dir / "log"))
        native = spark.read.parquet(str(work_dir / "spark"))
        assert timely.count() == n == native.count(), "the two reads differ"
        t_timely = timed_scan(timely, args.repeats)
        t_native = timed_scan(native, args.repeats)
        spark.dataSource.register(InMemoryRows)
        t_memory = timed_scan(spark.read.format("in_memory_rows").option("rows", n).load(), args.repeats)

        delays = stream_delays(spark, work_dir / "stream", args.stream_epochs, args.stream_rows,
                               args.stream_interval)
        spark.stop()
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)

    print(f"{n:,} records in {args.epochs} epochs")
    print(f"(a) timely capture to a Parquet event log    {n / t_capture:12,.0f} records/s   ({t_capture:.2f} s)")
    print(f"    DataFrame.write.parquet                  {n / t_write:12,.0f} records/s   ({t_write:.2f} s)")
    print(f"    capture / Spark write = {t_write / t_capture:.2f} (target >= 1)")
    print(f"(b) spark.read.format('timely'), complete    {n / t_timely:12,.0f} records/s   ({t_timely:.2f} s)")
    print(f"    spark.read.parquet (Spark's own files)   {n / t_native:12,.0f} records/s   ({t_native:.2f} s)")
    print(f"    timely read / Parquet read = {t_native / t_timely:.2f} (target >= 0.8)")
    print(f"    a Python data source reading nothing     {n / t_memory:12,.0f} records/s   ({t_memory:.2f} s)"
          f"   its / Parquet read = {t_native / t_memory:.2f} (the ceiling of a Python data source)")
    print(f"(c) completion in the writer -> readStream micro-batch, {len(delays)} epochs: "
          f"median {statistics.median(delays) * 1000:.0f} ms, max {max(delays) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
