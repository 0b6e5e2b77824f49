"""A part file of a Parquet event log appears whole or not at all."""

import pyarrow.parquet as pq
import pytest

import timely_spark as ts
from timely_spark.capture import ParquetEventReader, ParquetEventWriter


def test_a_write_that_fails_partway_leaves_no_part_file_and_readers_see_nothing(tmp_path, monkeypatch):
    real_write = pq.write_table

    def write_half_then_fail(table, where, *args, **kwargs):
        real_write(table, where, *args, **kwargs)
        with open(where, "r+b") as f:                 # a torn file: the disk filled up halfway
            f.truncate(f.seek(0, 2) // 2)
        raise OSError("No space left on device")

    monkeypatch.setattr(pq, "write_table", write_half_then_fail)
    writer = ParquetEventWriter(tmp_path, flush_seconds=0.0)
    with pytest.raises(ts.WorkerError, match="No space left"):
        ts.example(lambda s: s.to_stream([{"x": 1}, {"x": 2}]).capture_into(writer))
    parts = sorted(p.name for p in (tmp_path / "worker=0").iterdir() if p.name.startswith("part-"))
    assert parts == []                                 # nothing under a final name
    assert ParquetEventReader(tmp_path).next() is None  # and readers report nothing from it
