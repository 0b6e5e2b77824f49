"""A capturing worker that gets no record still moves its log's frontier: its
progress is written in the log's columns (another worker's, or the given schema)."""

import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.capture import LogIndex, Messages, ParquetEventWriter, Progress
from timely_spark.capture.parquet import CAPTURE_COLUMNS_RETRY


def _batch(*xs):
    return pa.record_batch({"x": pa.array(xs, pa.int64())})


def test_a_worker_without_records_moves_the_frontier_once_another_wrote_one(tmp_path):
    busy = ParquetEventWriter(tmp_path, worker=0, peers=2, flush_seconds=0)
    idle = ParquetEventWriter(tmp_path, worker=1, peers=2, flush_seconds=0)
    idle.push(Progress([(0, -1), (1, 1)]))
    assert idle.poll() >= CAPTURE_COLUMNS_RETRY        # no columns known yet: held back, looked at later
    busy.push(Messages(0, [_batch(1, 2)]))
    busy.push(Progress([(0, -1), (1, 1)]))
    assert LogIndex(tmp_path).snapshot().frontier.elements() == [0]      # the idle worker still holds 0
    assert idle.poll() is None                          # it found worker 0's columns and wrote its progress
    snap = LogIndex(tmp_path).snapshot()
    assert snap.frontier.elements() == [1]
    idle.push(Messages(1, [_batch(7)]))                 # a record later: the same columns as before
    idle.push(Progress([(1, -1)]))
    busy.push(Progress([(1, -1)]))
    busy.close(), idle.close()
    snap = LogIndex(tmp_path).snapshot()
    assert snap.frontier.elements() == [] and sum(p.rows for p in snap.complete()) == 3


def test_a_worker_closing_without_records_writes_the_logs_columns(tmp_path):
    busy = ParquetEventWriter(tmp_path, worker=0, peers=2, flush_seconds=0)
    idle = ParquetEventWriter(tmp_path, worker=1, peers=2, flush_seconds=60)     # never flushed before close
    busy.push(Messages(0, [_batch(1, 2)]))
    busy.push(Progress([(0, -1)]))
    busy.close()
    idle.push(Progress([(0, -1)]))
    idle.close()
    snap = LogIndex(tmp_path).snapshot()          # one set of columns across the log's files
    assert snap.frontier.elements() == [] and sum(p.rows for p in snap.complete()) == 2


def test_a_given_schema_writes_progress_before_any_record(tmp_path):
    w = ParquetEventWriter(tmp_path, flush_seconds=0, schema=pa.schema([("x", pa.int64()), ("diff", pa.int64())]))
    w.push(Progress([(0, -1), (1, 1)]))
    assert w.poll() is None
    assert LogIndex(tmp_path).snapshot().frontier.elements() == [1]
    w.push(Messages(1, [pa.record_batch({"x": pa.array([5], pa.int64()), "diff": pa.array([1], pa.int64())})]))
    w.push(Progress([(1, -1)]))
    w.close()
    assert sum(p.rows for p in LogIndex(tmp_path).snapshot().complete()) == 1


def test_a_schema_that_is_not_an_arrow_schema_is_refused(tmp_path):
    with pytest.raises(ValueError, match="schema must be the pyarrow.Schema"):
        ParquetEventWriter(tmp_path, schema={"x": "int64"})


def test_two_workers_capture_one_log_when_only_one_gets_records(tmp_path):
    """In a dataflow of two workers, every record on worker 0, both capturing: the
    log (not closed) completes each epoch while the job runs."""
    log = str(tmp_path / "log")

    def work(worker):
        writer = ParquetEventWriter(log, worker=worker.index, peers=worker.peers, flush_seconds=0)

        def build(scope):
            inp, stream = scope.new_input()
            stream.capture_into(writer)
            return inp, stream.probe()

        inp, probe = worker.dataflow(build)
        for epoch in range(3):
            if worker.index == 0:
                inp.send(_batch(epoch))
            inp.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(epoch + 1), timeout=30)
        # every worker flushed what its capture saw: the log is complete up to epoch 3 without closing
        worker.step_while(lambda: LogIndex(log).snapshot().frontier.elements() != [3], timeout=30)
        seen = LogIndex(log).snapshot().frontier.elements()
        inp.close()
        worker.step_while(lambda: not probe.done(), timeout=30)
        writer.close()
        return seen

    assert ts.execute(work, threads=2) == [[3], [3]]
