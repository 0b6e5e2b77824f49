"""Damaged or crafted part files: each is an EventLogError naming the file and what is
wrong, in both readers (LogIndex, under Spark's reads, and ParquetEventReader) -- never a
raw TypeError/JSONDecodeError/RecursionError, a silently wrong frontier, or a hang."""

import json
import os
import shutil
import threading

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from timely_spark.capture import EventLogError, LogIndex, Messages, ParquetEventReader, ParquetEventWriter, Progress
from timely_spark.progress import Antichain

BOUND = 20.0      # seconds a read of a crafted log may take before the test says it hung


def good_log(path, peers=1):
    w = ParquetEventWriter(path, 0, peers, flush_seconds=0.0)
    w.push(Messages(0, [{"n": 1}]))
    w.push(Progress([(0, -1), (1, 1)]))
    return path / "worker=0" / "part-000000.parquet"


def rewrite(file, table=None, meta=None, raw=None):
    """Rewrite a part file with another table and/or timely metadata (a dict or raw bytes)."""
    original = pq.read_table(file)
    table = table if table is not None else original
    if raw is None:
        old = json.loads(original.schema.metadata[b"timely"])
        raw = json.dumps({**old, **(meta or {})}).encode()
    pq.write_table(table.replace_schema_metadata({b"timely": raw}), file)


def with_column(table, name, column):
    return table.set_column(table.schema.get_field_index(name), name, column)


def struct_times(table):
    times = pa.array([{"outer": t, "inner": 0} for t in table["time"].to_pylist()],
                     pa.struct([("outer", pa.int64()), ("inner", pa.int64())]))   # older pyarrow infers them sorted
    return with_column(table, "time", times)


DAMAGE = {
    "malformed-json": (lambda f: rewrite(f, raw=b'{"format": "timely_spark.event_log.v1", '),
                       "its timely metadata is not valid JSON"),
    "json-list": (lambda f: rewrite(f, raw=b"[1, 2, 3]"), "its timely metadata is a JSON list, not an object"),
    "nested-200000-deep": (lambda f: rewrite(f, raw=b"[" * 200_000 + b"]" * 200_000),
                           "its timely metadata is nested too deeply"),
    "product-meta-over-int-column": (lambda f: rewrite(f, meta={"time": {"product": ["int", "int"]}}),
                                     r"column 'time' is int64, but the metadata's time type \{'product'"),
    "int-meta-over-struct-column": (lambda f: rewrite(f, table=struct_times(pq.read_table(f))),
                                    r"column 'time' is struct<outer: int64, inner: int64>, but the metadata's time "
                                    "type 'int' needs int64"),
    "string-time-column": (lambda f: rewrite(f, table=with_column(pq.read_table(f), "time",
                                                                  pc.cast(pq.read_table(f)["time"], pa.string()))),
                           "column 'time' is string, but the metadata's time type 'int' needs int64"),
    "kind-2": (lambda f: rewrite(f, table=with_column(pq.read_table(f), "kind", pa.array([0, 1, 2], pa.int8()))),
               r"rows of kind \[2\] \(0 is a data row, 1 a progress update\)"),
    "float-time-column": (lambda f: rewrite(f, table=with_column(pq.read_table(f), "time",
                                                                 pa.array([0.0, 0.0, 1.0]))),
                          "column 'time' is double, but the metadata's time type 'int' needs int64"),
    "peers-0": (lambda f: rewrite(f, meta={"peers": 0}), "its metadata names worker 0 of 0 workers"),
    "worker-minus-1": (lambda f: rewrite(f, meta={"worker": -1}), "its metadata names worker -1 of 1 workers"),
    "unknown-time-type": (lambda f: rewrite(f, meta={"time": {"clock": []}}),
                          r"its metadata's time type .*clock.* is not a timestamp type"),
    "null-progress-count": (lambda f: rewrite(f, table=with_column(pq.read_table(f), "diff",
                                                                   pa.array([None, None, None], pa.int64()))),
                            r"2 progress rows without a count \(diff is null\)"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_part_file_is_named_with_what_is_wrong(tmp_path, damage):
    file = good_log(tmp_path)
    make, message = DAMAGE[damage]
    make(file)
    with pytest.raises(EventLogError, match=f"^{file}: {message}"):
        LogIndex(tmp_path).snapshot()
    with pytest.raises(EventLogError, match=f"^{file}: {message}"):
        list(ParquetEventReader(tmp_path))


def test_a_negative_progress_count_is_named(tmp_path):
    file = good_log(tmp_path)
    table = pq.read_table(file)
    rewrite(file, table=with_column(table, "diff", pa.array([None, -5, 1], pa.int64())))     # (0, -5): was "complete"
    with pytest.raises(EventLogError, match=f"^{file}: its progress takes worker 0's count of time 0 to -4, below "
                                            "zero"):
        LogIndex(tmp_path).snapshot()


def bounded(call):
    """``call()``'s result or exception, failing the test if it does not return within BOUND."""
    out = {}

    def run():
        try:
            out["value"] = call()
        except BaseException as exc:  # noqa: BLE001 -- handed to the test
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BOUND)
    assert not thread.is_alive(), f"the read did not return within {BOUND} s (it hangs)"
    if "error" in out:
        raise out["error"]
    return out["value"]


@pytest.mark.timeout(60)
def test_a_fifo_named_like_a_part_file_is_named_not_waited_on(tmp_path):
    good_log(tmp_path)
    fifo = tmp_path / "worker=0" / "part-000001.parquet"
    os.mkfifo(fifo)
    with pytest.raises(EventLogError, match=f"^{fifo}: named like a part file but a FIFO, not a regular file"):
        bounded(lambda: LogIndex(tmp_path).snapshot())
    with pytest.raises(EventLogError, match=f"^{fifo}: named like a part file but a FIFO"):
        bounded(lambda: list(ParquetEventReader(tmp_path)))
    os.unlink(fifo)
    (tmp_path / "worker=0" / "part-000001.parquet").mkdir()
    with pytest.raises(EventLogError, match="part-000001.parquet: named like a part file but a directory"):
        bounded(lambda: LogIndex(tmp_path).snapshot())


def test_a_stream_waits_for_a_worker_that_has_not_started_then_names_it(tmp_path):
    good_log(tmp_path, peers=2)                     # worker 1 of 2 has not made its directory yet
    index = LogIndex(tmp_path, desc="int")
    assert index.snapshot().frontier == Antichain([0])        # held back by worker 1, no error
    w1 = ParquetEventWriter(tmp_path, 1, 2, flush_seconds=0.0)
    w1.push(Messages(0, [{"n": 2}]))
    w1.push(Progress([(0, -1), (1, 1)]))
    assert index.snapshot().frontier == Antichain([1])
    shutil.rmtree(tmp_path / "worker=1")           # its part file and its writer's lock file
    with pytest.raises(EventLogError, match=r"for worker\(s\) \[1\] \(worker=1\): its directory went away"):
        index.snapshot()                            # seen, then gone: no wait
    with pytest.raises(EventLogError, match=r"no directory for worker\(s\) \[1\] \(worker=1\) after waiting 0 s for "
                                            r"their writers to start \(MISSING_WORKER_WAIT\)"):
        LogIndex(tmp_path, desc="int", missing_worker_wait=0.0).snapshot()
    with pytest.raises(EventLogError, match=r"no directory for worker\(s\) \[1\]"):
        LogIndex(tmp_path).snapshot()               # a batch read does not wait
