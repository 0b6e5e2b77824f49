"""Spark's batch reads of an event log name another log's part file hidden in a worker's
directory (same shape and name, another writer) -- through ``format("timely")`` and
``read_event_log`` alike.  (The streaming read: test_event_log_stream.py; the readers
without Spark: tests/capture/test_foreign_part_files.py.)"""

import shutil

import pytest

import timely_spark as ts
from timely_spark.capture import EventLogError

from ..capture.test_foreign_part_files import write_log


def test_a_batch_read_names_another_logs_part_file(spark, tmp_path):
    log, other = tmp_path / "log", tmp_path / "other"
    write_log(log, 3)
    write_log(other, 6, first=1000)
    assert spark.read.format("timely").load(str(log)).count() == 6          # the log alone reads whole
    n = len(list((log / "worker=1").glob("part-*.parquet")))
    target = log / "worker=1" / f"part-{n:06d}.parquet"
    shutil.copy(other / "worker=1" / target.name, target)
    with pytest.raises(EventLogError, match=f"^{target}: a part file of another event log"):
        spark.read.format("timely").load(str(log)).collect()
    with pytest.raises(EventLogError, match=f"^{target}: a part file of another event log"):
        ts.spark.read_event_log(spark, log)
