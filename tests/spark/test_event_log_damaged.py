"""format("timely") over crafted, damaged, early or many-file logs: named errors, never a
hang; a stream waits for writers that have not started; each file is opened once per load."""

import os
import pickle
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import timely_spark as ts
from timely_spark.capture import EventLogError, Messages, ParquetEventWriter, Progress, log_index

WAIT = 60.0


def epochs(writer, worker, first, last):
    for e in range(first, last):
        writer.push(Messages(e, [{"w": worker, "n": e * 10 + k} for k in range(3)]))
        writer.push(Progress([(e, -1), (e + 1, 1)]))


def rows_of(worker, first, last):
    return sorted((e, worker, e * 10 + k) for e in range(first, last) for k in range(3))


@pytest.mark.timeout(240)
def test_a_fifo_named_like_a_part_file_fails_a_spark_read_naming_it(spark, tmp_path):
    epochs(ParquetEventWriter(tmp_path, 0, 1, flush_seconds=0.0), 0, 0, 2)
    fifo = tmp_path / "worker=0" / "part-000002.parquet"
    os.mkfifo(fifo)
    with pytest.raises(EventLogError, match=f"{fifo}: named like a part file but a FIFO, not a regular file"):
        spark.read.format("timely").load(str(tmp_path)).collect()


def test_a_damaged_row_fails_a_spark_read_naming_the_file(spark, tmp_path):
    epochs(ParquetEventWriter(tmp_path, 0, 1, flush_seconds=0.0), 0, 0, 2)
    victim = tmp_path / "worker=0" / "part-000001.parquet"
    table = pq.read_table(victim)
    kinds = pa.array([0, 0, 0, 2, 1], pa.int8())
    pq.write_table(table.set_column(table.schema.get_field_index("kind"), "kind", kinds), victim)
    with pytest.raises(EventLogError, match=rf"^{victim}: rows of kind \[2\]"):
        ts.spark.read_event_log(spark, tmp_path)


@pytest.mark.slow
def test_a_stream_without_a_schema_over_a_log_not_started_says_how_to_give_one(spark, tmp_path):
    for path in (tmp_path / "not-yet", tmp_path / "empty", tmp_path / "no-files"):
        if path.name == "empty":
            path.mkdir()
        elif path.name == "no-files":
            ParquetEventWriter(path, 0, 1)
        with pytest.raises(EventLogError, match=rf"^{path}: the event log has not started yet \(no part files .*\); "
                                                r"a stream over it can start now if given its schema: "
                                                r"spark.readStream.format\(\"timely\"\).schema\(\"time long"):
            spark.readStream.format("timely").load(str(path))
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x.parquet").write_bytes(b"")
    with pytest.raises(EventLogError, match="not a timely_spark event log"):
        spark.readStream.format("timely").load(str(tmp_path / "plain"))


@pytest.mark.slow
def test_a_stream_given_its_schema_waits_for_a_worker_that_has_not_started(spark, tmp_path):
    log = tmp_path / "log"
    epochs(ParquetEventWriter(log, 0, 2, flush_seconds=0.0), 0, 0, 2)      # worker 1 of 2: no directory yet
    got, lock = [], threading.Lock()

    def sink(frame, _):
        rows = [(r["time"], r["w"], r["n"]) for r in frame.collect()]
        with lock:
            got.extend(rows)

    query = (spark.readStream.format("timely").schema("time long, worker long, w long, n long").load(str(log))
             .writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        query.processAllAvailable()
        assert query.isActive and query.exception() is None and got == []     # was: the query died
        epochs(ParquetEventWriter(log, 1, 2, flush_seconds=0.0), 1, 0, 2)
        query.processAllAvailable()
        assert sorted(got) == sorted(rows_of(0, 0, 2) + rows_of(1, 0, 2))
    finally:
        query.stop()


def test_a_read_schema_that_would_change_the_logs_values_is_refused(spark, tmp_path):
    epochs(ParquetEventWriter(tmp_path, 0, 1, flush_seconds=0.0), 0, 0, 1)
    frame = spark.read.format("timely").schema("time long, worker long, w long, n string").load(str(tmp_path))
    with pytest.raises(EventLogError, match=r"column 'n' holds int64, but the read's schema says string"):
        frame.collect()


def test_a_load_opens_each_part_file_once_and_executors_get_no_summary(tmp_path, monkeypatch):
    from timely_spark.spark.datasource import TimelyDataSource

    epochs(ParquetEventWriter(tmp_path, 0, 1, flush_seconds=0.0), 0, 0, 5)
    opened = []
    original = log_index.open_part
    monkeypatch.setattr(log_index, "open_part", lambda f: opened.append(f) or original(f))
    source = TimelyDataSource({"path": str(tmp_path)})
    schema = source.schema()                                   # load(): every file checked, once
    assert len(opened) == 5 and schema.fieldNames() == ["time", "worker", "w", "n"]
    source = pickle.loads(pickle.dumps(source))                # Spark hands the source to its planner
    reader = source.reader(schema)
    shipped = pickle.dumps(reader)                             # what executors get
    assert len(reader.partitions()[0].scans) == 5 and len(opened) == 5      # no footer read again
    assert pickle.loads(shipped).partitions and b"PartSummary" not in shipped
    assert [len(p.scans) for p in TimelyDataSource({"path": str(tmp_path)}).reader(schema).partitions()] == [5]
    assert len(opened) == 5                                    # a new read of unchanged files: from the cache
