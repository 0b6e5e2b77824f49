"""A log of pickled records runs code when read: ParquetEventReader and follow refuse it,
naming the file, unless told ``allow_pickle=True`` -- and refuse it before unpickling."""

import os

import pytest

import timely_spark as ts
from timely_spark.capture import Messages, ParquetEventReader, ParquetEventWriter, Progress, extract
from timely_spark.capture.follow import follow


class Planted:
    """A record that creates a file when it is unpickled (what a crafted log could do)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture
def crafted(tmp_path):
    """A closed log of one pickled record, and the file loading it would create."""
    log, marker = str(tmp_path / "log"), str(tmp_path / "ran-code")
    w = ParquetEventWriter(log, flush_seconds=0.0)
    w.push(Messages(0, [Planted(marker)]))
    w.push(Progress([(0, -1)]))
    w.close()
    assert not os.path.exists(marker)
    return log, marker


def test_the_reader_refuses_a_pickled_log_unless_allowed(crafted):
    log, marker = crafted
    with pytest.raises(ts.capture.EventLogError, match=r"part-000000\.parquet: the log's records are pickled") as e:
        list(ParquetEventReader(log))
    assert "allow_pickle=True" in str(e.value)
    assert not os.path.exists(marker)
    extract(iter(ParquetEventReader(log, allow_pickle=True)))
    assert os.path.exists(marker)                     # allowed: it is code, as documented


def test_follow_refuses_a_pickled_log_unless_allowed(crafted):
    log, marker = crafted
    with pytest.raises(ts.WorkerError, match=r"part-000000\.parquet: the log's records are pickled"):
        ts.execute(lambda worker: worker.dataflow(lambda s: follow(log, s, poll=0.01).probe()), timeout=60)
    assert not os.path.exists(marker)
    ts.execute(lambda worker: worker.dataflow(lambda s: follow(log, s, poll=0.01, allow_pickle=True).probe()),
               timeout=60)
    assert os.path.exists(marker)
