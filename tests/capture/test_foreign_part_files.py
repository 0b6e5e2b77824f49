"""A part file of another event log in a worker's directory -- same time type, same
columns, same worker number, the right file name, so only its writer's identity tells
it apart -- is an EventLogError naming it in every reader, without Spark: the log
index under Spark's batch and streaming reads, ParquetEventReader, and a replay."""

import shutil

import pytest

import timely_spark as ts
from timely_spark.capture import (
    EventLogError,
    LogIndex,
    Messages,
    ParquetEventReader,
    ParquetEventWriter,
    Progress,
    replay_into,
)

PEERS = 2


def write_log(path, epochs, first=0):
    """A closed log of ``PEERS`` workers, one part file per epoch and worker."""
    for w in range(PEERS):
        writer = ParquetEventWriter(path, w, PEERS, flush_seconds=0.0)
        for e in range(epochs):
            writer.push(Messages(e, [{"n": first + 10 * e + w}]))
            writer.push(Progress([(e, -1), (e + 1, 1)]))
        writer.push(Progress([(epochs, -1)]))
        writer.close()


@pytest.fixture(params=["replacing part 1", "appended"])
def intruder(request, tmp_path):
    """The log's worker=0 directory with another log's worker=0 part file in it."""
    log, other = tmp_path / "log", tmp_path / "other"
    write_log(log, 3)
    write_log(other, 6, first=1000)
    parts = sorted((log / "worker=0").glob("part-*.parquet"))
    n = 1 if request.param == "replacing part 1" else len(parts)
    target = log / "worker=0" / f"part-{n:06d}.parquet"
    shutil.copy(other / "worker=0" / target.name, target)
    return log, target


def test_the_log_index_names_it(intruder):
    log, target = intruder
    with pytest.raises(EventLogError, match=f"^{target}: a part file of another event log"):
        LogIndex(log).snapshot()


def test_parquet_event_reader_names_it(intruder):
    log, target = intruder
    with pytest.raises(EventLogError, match=f"^{target}: a part file of another event log"):
        list(ParquetEventReader(log, worker=0))
    assert len(list(ParquetEventReader(log, worker=1))) > 0       # the other worker's stream is its own


def test_a_replay_names_it(intruder):
    log, target = intruder

    def work(worker):
        index = worker.next_dataflow_index()
        probe = worker.dataflow(lambda s: replay_into([ParquetEventReader(log, worker=worker.index)], s).probe())
        worker.step_while(lambda: not probe.done(), timeout=5)
        worker.drop_dataflow(index)

    with pytest.raises(ts.WorkerError, match=f"{target.name}: a part file of another event log") as err:
        ts.execute(work, threads=PEERS, timeout=15)
    assert err.value.worker == 0


def test_the_logs_own_files_read_whole():
    """The control: without an intruder every reader takes the log."""
    import tempfile

    with tempfile.TemporaryDirectory() as path:
        write_log(path, 3)
        snapshot = LogIndex(path).snapshot()
        assert snapshot.frontier.elements() == [] and sum(s.rows for s in snapshot.complete()) == 3 * PEERS
        events = list(ParquetEventReader(path, worker=0))
        assert [e.data for e in events if isinstance(e, Messages)] == [[{"n": 0}], [{"n": 10}], [{"n": 20}]]
