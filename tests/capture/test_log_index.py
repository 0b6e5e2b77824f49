"""LogIndex: the reader under Spark's batch and streaming reads of an event log."""

import pytest

from timely_spark import Product
from timely_spark.capture import EventLogError, LogIndex, Messages, ParquetEventWriter, Progress, log_index
from timely_spark.progress import Antichain


def product_log(path):
    w = ParquetEventWriter(path, 0, 1, flush_seconds=0.0)
    w.push(Messages(Product(0, 1), [{"n": 1}]))
    w.push(Messages(Product(1, 0), [{"n": 2}, {"n": 3}]))
    w.push(Messages(Product(0, 3), [{"n": 4}]))
    w.push(Progress([(Product(0, 0), -1), (Product(0, 2), 1), (Product(1, 0), 1)]))
    return w


def planned(scans):
    return [(s.times, s.rows) for s in scans]


def test_the_times_between_two_frontiers_in_the_partial_order(tmp_path):
    product_log(tmp_path)
    snap = LogIndex(tmp_path).snapshot()
    assert snap.frontier == Antichain([Product(0, 2), Product(1, 0)])
    assert planned(snap.complete()) == [([{"outer": 0, "inner": 1}], 1)]
    later = Antichain([Product(1, 0)])                    # (0, 3) completes, (1, 0) does not
    assert planned(snap.scans(since=snap.frontier, upto=later)) == [([{"outer": 0, "inner": 3}], 1)]
    assert planned(snap.scans(since=later, upto=Antichain())) == [([{"outer": 1, "inner": 0}], 2)]
    assert planned(snap.scans(since=Antichain(), upto=Antichain())) == []        # all complete before


def test_files_are_summarized_once_and_a_rewritten_log_starts_over(tmp_path, monkeypatch):
    w = product_log(tmp_path)
    index = LogIndex(tmp_path)
    first = index.snapshot()
    w.push(Progress([(Product(0, 2), -1)]))
    summarized = []
    original = log_index.open_part
    monkeypatch.setattr(log_index, "open_part", lambda f: summarized.append(f.name) or original(f))
    second = index.snapshot()
    assert summarized == ["part-000001.parquet"] and second.frontier == Antichain([Product(1, 0)])
    again = LogIndex(tmp_path).snapshot()                     # a new index: the process knows every file
    assert summarized == ["part-000001.parquet"] and again.frontier == second.frontier
    assert len(first.parts) == 1 and len(second.parts) == 2        # the earlier snapshot is unchanged
    victim = tmp_path / "worker=0" / "part-000000.parquet"
    victim.write_bytes(victim.read_bytes()[:100])
    with pytest.raises(EventLogError, match="part-000000.parquet: not a readable Parquet file"):
        index.snapshot()


def test_a_log_not_started_yet(tmp_path):
    assert LogIndex(tmp_path / "later", desc="int").snapshot().frontier == Antichain([0])
    with pytest.raises(EventLogError, match="no such directory"):
        LogIndex(tmp_path / "later").snapshot()
    ParquetEventWriter(tmp_path / "empty", 0, 1)
    with pytest.raises(EventLogError, match="no part files yet"):
        LogIndex(tmp_path / "empty").snapshot()
