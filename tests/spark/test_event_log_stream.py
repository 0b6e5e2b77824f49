"""spark.readStream.format("timely"): each complete time once, as it completes; restarts
from a checkpoint; partial-order times; Arrow records; bad files named in streaming too.

Every wait is bounded; no test asserts a timing."""

import queue
import shutil
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import timely_spark as ts
from timely_spark import Product
from timely_spark.capture import LogIndex, Messages, ParquetEventWriter, Progress

WAIT = 30.0     # seconds any single wait may take before the test fails saying what did not happen


def wait_for(condition, what, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.02)


class Batches:
    """A foreachBatch sink keeping each micro-batch's rows as sorted tuples."""

    def __init__(self, columns=("time", "worker", "n")):
        self.columns = columns
        self.batches = []
        self.lock = threading.Lock()

    def __call__(self, frame, batch_id):
        rows = sorted(tuple(_plain(r[c]) for c in self.columns) for r in frame.collect())
        with self.lock:
            if rows:
                self.batches.append(rows)

    def rows(self):
        with self.lock:
            return [r for b in self.batches for r in b]


def _plain(v):
    return tuple(v) if hasattr(v, "asDict") else v


def start(spark, path, sink, checkpoint, trigger=None):
    writer = spark.readStream.format("timely").load(str(path)).writeStream.foreachBatch(sink)
    if trigger is not None:
        writer = writer.trigger(**trigger)
    return writer.option("checkpointLocation", str(checkpoint)).start()


class LiveJob:
    """A 2-worker timely job (ts.execute threads) capturing epochs into ``path`` while the
    test runs: ``epoch(e)`` sends 3 records per worker at epoch e and completes it."""

    def __init__(self, path, flush_seconds=0.0, peers=2):
        self.path = path
        self.commands = [queue.Queue() for _ in range(peers)]
        self.error = []
        self.completed = {}                      # epoch -> Event set once worker 0's probe passed it

        def work(worker):
            writer = ParquetEventWriter(path, worker.index, worker.peers, flush_seconds=flush_seconds)
            index = worker.next_dataflow_index()
            inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.capture_into(writer) or st.probe()))(
                *s.new_input()))
            commands = self.commands[worker.index]
            while True:
                try:
                    command, arg = commands.get(timeout=0.01)
                except queue.Empty:
                    worker.step()
                    continue
                if command == "epoch":
                    inp.send_batch([{"w": worker.index, "n": arg * 10 + k} for k in range(3)])
                    inp.advance_to(arg + 1)
                    worker.step_while(lambda: probe.less_than(inp.time), timeout=WAIT)
                    if worker.index == 0:
                        self.completed.setdefault(arg, threading.Event()).set()
                elif command == "open":              # records at an epoch that stays open
                    inp.send_batch([{"w": worker.index, "n": arg * 10 + k} for k in range(3)])
                    for _ in range(5):
                        worker.step()
                    writer.flush()
                elif command == "abandon":
                    worker.drop_dataflow(index)
                    return
                else:
                    inp.close()
                    worker.step_while(lambda: not probe.done(), timeout=WAIT)
                    writer.close()
                    return

        def run():
            try:
                ts.execute(work, threads=peers, timeout=120)
            except BaseException as exc:  # noqa: BLE001 -- reported by the test
                self.error.append(exc)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def send(self, command, arg=None):
        for q in self.commands:
            q.put((command, arg))

    def epoch(self, e):
        """Complete epoch ``e`` and wait until the log's own files prove it complete."""
        self.send("epoch", e)
        index = LogIndex(self.path)
        wait_for(lambda: self.path.exists() and _frontier_past(index, e), f"epoch {e} complete in the log")

    def stop(self, command="finish"):
        self.send(command)
        self.thread.join(timeout=WAIT)
        assert not self.thread.is_alive() and not self.error, self.error


def _frontier_past(index, e):
    try:
        return not index.snapshot().frontier.less_equal(e)
    except ts.capture.EventLogError:     # no files yet
        return False


def rows_of(epoch):
    return sorted((epoch, w, epoch * 10 + k) for w in range(2) for k in range(3))


@pytest.mark.slow
def test_a_live_two_worker_log_streams_each_epoch_once_as_it_completes(spark, tmp_path):
    log = tmp_path / "log"
    job = LiveJob(log)
    sink = Batches()
    query = None
    try:
        job.epoch(0)
        batch_read = spark.read.format("timely").load(str(log))
        assert sorted((r["time"], r["worker"], r["n"]) for r in batch_read.collect()) == rows_of(0)
        query = start(spark, log, sink, tmp_path / "checkpoint")
        query.processAllAvailable()
        assert sink.rows() == rows_of(0)
        for e in (1, 2, 3):
            job.epoch(e)
            query.processAllAvailable()
            assert sink.batches[-1] == rows_of(e), f"epoch {e}"       # exactly that epoch's rows, once
            assert sink.rows() == sorted(r for x in range(e + 1) for r in rows_of(x))
        job.send("open", 4)                      # epoch 4 has rows but stays open
        wait_for(lambda: ts.spark.read_event_log(spark, log, complete_only=False).where("time = 4").count() == 6,
                 "epoch 4's rows written")
        query.processAllAvailable()
        assert all(r[0] < 4 for r in sink.rows())
        assert ts.spark.read_event_log(spark, log).where("time = 4").count() == 0
        job.stop("finish")                       # the stream ends: epoch 4 is complete
        query.processAllAvailable()
        assert sink.batches[-1] == rows_of(4)
        assert sink.rows() == sorted(r for x in range(5) for r in rows_of(x))
        assert ts.spark.event_log_frontier(spark, log).is_empty()
    finally:
        if query is not None:
            query.stop()
        if job.thread.is_alive():
            job.stop("abandon")


def epochs_log(path, epochs, start=0, writers=None, records=None):
    """Two workers' writers (made once, kept in ``writers``) completing ``epochs`` epochs."""
    writers = writers if writers is not None else [ParquetEventWriter(path, w, 2, flush_seconds=0.0)
                                                   for w in range(2)]
    for e in range(start, start + epochs):
        for w, writer in enumerate(writers):
            writer.push(Messages(e, records(w, e) if records else [{"w": w, "n": e * 10 + k} for k in range(3)]))
            writer.push(Progress([(e, -1), (e + 1, 1)]))
    return writers


@pytest.mark.slow
def test_restart_from_the_checkpoint_neither_loses_nor_repeats(spark, tmp_path):
    log, out, checkpoint = tmp_path / "log", tmp_path / "out", tmp_path / "checkpoint"
    writers = epochs_log(log, 2)

    def run():
        query = (spark.readStream.format("timely").load(str(log)).writeStream.format("parquet")
                 .option("path", str(out)).option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        assert query.awaitTermination(WAIT), "the availableNow query did not end"
        return sorted((r["time"], r["worker"], r["n"]) for r in spark.read.parquet(str(out)).collect())

    assert run() == sorted(r for e in range(2) for r in rows_of(e))
    epochs_log(log, 3, start=2, writers=writers)
    assert run() == sorted(r for e in range(5) for r in rows_of(e))      # each row once
    assert run() == sorted(r for e in range(5) for r in rows_of(e))      # nothing new: nothing added


@pytest.mark.slow
def test_processing_time_trigger_and_the_console_sink(spark, tmp_path):
    log = tmp_path / "log"
    epochs_log(log, 2)
    query = (spark.readStream.format("timely").load(str(log)).groupBy("time").count()
             .writeStream.outputMode("complete").format("console")
             .trigger(processingTime="100 milliseconds").start())
    try:
        query.processAllAvailable()
        progress = [p for p in query.recentProgress if p["numInputRows"]]
        assert sum(p["numInputRows"] for p in progress) == 12
    finally:
        query.stop()


def test_an_open_last_epoch_is_not_streamed(spark, tmp_path):
    log = tmp_path / "log"
    writers = epochs_log(log, 2)
    for w, writer in enumerate(writers):
        writer.push(Messages(2, [{"w": w, "n": 99}]))
        writer.flush()
    sink = Batches()
    query = start(spark, log, sink, tmp_path / "checkpoint", trigger={"availableNow": True})
    assert query.awaitTermination(WAIT)
    assert sink.rows() == sorted(r for e in range(2) for r in rows_of(e))


@pytest.mark.slow
def test_product_times_stream_in_the_partial_order(spark, tmp_path):
    writer = ParquetEventWriter(tmp_path / "log", 0, 1, flush_seconds=0.0)
    writer.push(Messages(Product(0, 1), [{"n": 1}]))
    writer.push(Messages(Product(1, 0), [{"n": 2}]))
    writer.push(Messages(Product(0, 3), [{"n": 3}]))
    writer.push(Progress([(Product(0, 0), -1), (Product(0, 2), 1), (Product(1, 0), 1)]))
    sink = Batches(("time", "n"))
    query = start(spark, tmp_path / "log", sink, tmp_path / "checkpoint")
    try:
        query.processAllAvailable()
        assert sink.batches == [[((0, 1), 1)]]
        writer.push(Progress([(Product(0, 2), -1)]))          # frontier {(1, 0)}: (0, 3) is complete
        query.processAllAvailable()
        assert sink.batches[-1] == [((0, 3), 3)]
        writer.push(Progress([(Product(1, 0), -1)]))          # the stream ends
        query.processAllAvailable()
        assert sink.batches[-1] == [((1, 0), 2)] and len(sink.rows()) == 3
    finally:
        query.stop()


@pytest.mark.slow
def test_tuple_times_and_arrow_records(spark, tmp_path):
    writer = ParquetEventWriter(tmp_path / "log", 0, 1, flush_seconds=0.0)
    batch = pa.record_batch({"name": ["a", "b"], "score": [1.5, None], "ok": [True, False]})
    writer.push(Messages((0, 1), [batch]))
    writer.push(Messages((1, 0), [batch.slice(1)]))
    writer.push(Progress([((0, 0), -1), ((0, 2), 1)]))
    assert [(r["time"]["f1"], r["name"]) for r in spark.read.format("timely").load(str(tmp_path / "log")).collect()] \
        == [(1, "a"), (1, "b")]
    sink = Batches(("time", "name", "score", "ok"))
    query = start(spark, tmp_path / "log", sink, tmp_path / "checkpoint")
    try:
        query.processAllAvailable()
        assert sink.batches == [[((0, 1), "a", 1.5, True), ((0, 1), "b", None, False)]]
        writer.push(Progress([((0, 2), -1), ((1, 1), 1)]))
        query.processAllAvailable()
        assert sink.batches[-1] == [((1, 0), "b", None, False)]
    finally:
        query.stop()


@pytest.mark.slow
def test_stray_foreign_and_temporary_files_change_nothing_in_a_stream(spark, tmp_path):
    log, other = tmp_path / "log", tmp_path / "other"
    writers = epochs_log(log, 1)
    epochs_log(other, 2)
    sink = Batches()
    query = start(spark, log, sink, tmp_path / "checkpoint")
    try:
        query.processAllAvailable()
        pq.write_table(pa.table({"x": [1, 2, 3]}), log / "worker=0" / "data.parquet")     # a foreign Parquet file
        shutil.copy(other / "worker=1" / "part-000001.parquet", log / "worker=1" / ".part-000002.parquet.tmp")
        shutil.copy(other / "worker=0" / "part-000000.parquet", log / "worker=0" / "stray.parquet")
        epochs_log(log, 2, start=1, writers=writers)
        query.processAllAvailable()
        assert sink.rows() == sorted(r for e in range(3) for r in rows_of(e))
    finally:
        query.stop()


@pytest.mark.parametrize("damage", ["another_logs_part", "missing_worker", "truncated"])
def test_a_bad_file_stops_a_stream_naming_it(spark, tmp_path, damage):
    from pyspark.errors import StreamingQueryException

    log, other = tmp_path / "log", tmp_path / "other"
    writers = epochs_log(log, 1)
    epochs_log(other, 2)
    sink = Batches()
    query = start(spark, log, sink, tmp_path / "checkpoint")
    try:
        query.processAllAvailable()
        if damage == "another_logs_part":
            named = log / "worker=0" / "part-000001.parquet"
            shutil.copy(other / "worker=0" / "part-000001.parquet", named)
            expected = f"{named}: a part file of another event log"
        elif damage == "missing_worker":
            shutil.rmtree(log / "worker=1")
            expected = f"{log}: the log has 2 workers but no directory for worker\\(s\\) \\[1\\] \\(worker=1\\)"
        else:
            epochs_log(log, 1, start=1, writers=writers)
            named = log / "worker=1" / "part-000001.parquet"
            data = named.read_bytes()
            named.write_bytes(data[: len(data) // 2])
            expected = f"{named}: not a readable Parquet file"
        with pytest.raises(ts.capture.EventLogError, match=f"^{expected}") as err:   # as itself, the file first
            query.processAllAvailable()
        assert isinstance(err.value.__cause__, StreamingQueryException)           # Spark's error stays reachable
        assert sink.rows() == rows_of(0)            # nothing of the bad file was delivered
    finally:
        query.stop()


@pytest.mark.slow
def test_a_checkpoint_is_refused_by_another_log_at_its_path(spark, tmp_path):
    from pyspark.errors import StreamingQueryException

    log = tmp_path / "log"
    epochs_log(log, 2)
    sink = Batches()
    query = start(spark, log, sink, tmp_path / "checkpoint")
    query.processAllAvailable()
    query.stop()
    shutil.rmtree(log)
    epochs_log(log, 3)                              # a new log, new writers, at the same path
    query = start(spark, log, sink, tmp_path / "checkpoint")
    try:
        with pytest.raises(ts.capture.EventLogError, match=f"^{log}: worker=0 holds another event log") as err:
            query.processAllAvailable()
        assert isinstance(err.value.__cause__, StreamingQueryException)
    finally:
        query.stop()
    assert sink.rows() == sorted(r for e in range(2) for r in rows_of(e))


@pytest.mark.slow
def test_an_epoch_completed_then_idle_reaches_the_stream(spark, tmp_path):
    log = tmp_path / "log"
    job = LiveJob(log, flush_seconds=1.0)          # the writer's default delay
    sink = Batches()
    query = None
    try:
        job.epoch(0)                               # waits until the log shows epoch 0 complete
        query = start(spark, log, sink, tmp_path / "checkpoint")
        query.processAllAvailable()
        job.send("epoch", 1)                       # complete epoch 1, then the job idles
        wait_for(lambda: 1 in job.completed, "epoch 1 complete in the job")
        job.completed[1].wait(WAIT)
        index = LogIndex(log)
        wait_for(lambda: _frontier_past(index, 1), "epoch 1, completed then idle, readable in the log", timeout=2.0)
        query.processAllAvailable()
        assert sink.batches[-1] == rows_of(1)
    finally:
        if query is not None:
            query.stop()
        job.stop("abandon")
