"""Only a log's own files count: stray, foreign and temporary files are ignored or named,
a missing worker or a damaged file is an EventLogError naming it -- never mixed in."""

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import timely_spark as ts
from timely_spark.capture import EventLogError, ParquetEventWriter


def write_log(path, epochs=4, open_last=False):
    def work(worker):
        writer = ParquetEventWriter(path, worker.index, worker.peers, flush_seconds=0.0)
        index = worker.next_dataflow_index()
        inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.capture_into(writer) or st.probe()))(
            *s.new_input()))
        for epoch in range(epochs):
            inp.send_batch([{"epoch": epoch, "w": worker.index, "n": k} for k in range(3)])
            if open_last and epoch == epochs - 1:
                break
            inp.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(inp.time), timeout=30)
        for _ in range(5):
            worker.step()
        writer.flush()
        if open_last:
            worker.drop_dataflow(index)
        else:
            inp.close()
            worker.step_while(lambda: not probe.done(), timeout=30)
            writer.close()

    ts.execute(work, threads=2, timeout=60)


def counts(spark, path):
    rows = ts.spark.read_event_log(spark, path).groupBy("time").count().collect()
    return sorted((r["time"], r["count"]) for r in rows)


def test_stray_foreign_and_temporary_files_do_not_change_the_result(spark, tmp_path):
    log, other = tmp_path / "log", tmp_path / "other"
    write_log(log)
    write_log(other, epochs=2)
    expected = [(t, 6) for t in range(4)]
    assert counts(spark, log) == expected
    pq.write_table(pa.table({"x": [1, 2, 3]}), log / "worker=0" / "data.parquet")     # a foreign Parquet file
    shutil.copy(other / "worker=0" / "part-000000.parquet", log / "worker=0" / ".part-000099.parquet.tmp")
    assert counts(spark, log) == expected
    assert ts.spark.event_log_frontier(spark, log).elements() == []


def test_another_logs_part_file_pretending_to_belong_is_named(spark, tmp_path):
    log, other = tmp_path / "log", tmp_path / "other"
    write_log(log)
    write_log(other, epochs=2)
    n = len(list((log / "worker=0").glob("part-*.parquet")))
    intruder = log / "worker=0" / f"part-{n:06d}.parquet"
    shutil.copy(other / "worker=0" / "part-000000.parquet", intruder)
    with pytest.raises(EventLogError, match=f"{intruder.name}: a part file of another event log"):
        ts.spark.read_event_log(spark, log)


def test_a_missing_worker_directory_is_named(spark, tmp_path):
    write_log(tmp_path)
    shutil.rmtree(tmp_path / "worker=1")
    with pytest.raises(EventLogError, match=r"no directory for worker\(s\) \[1\] \(worker=1\)"):
        ts.spark.read_event_log(spark, tmp_path)


def test_a_worker_missing_a_part_file_is_named(spark, tmp_path):
    write_log(tmp_path)
    (tmp_path / "worker=1" / "part-000001.parquet").unlink()
    with pytest.raises(EventLogError, match="worker=1.*part 2 where part 1 was expected|part 2 where part 1"):
        ts.spark.read_event_log(spark, tmp_path)


def test_a_truncated_file_is_named(spark, tmp_path):
    write_log(tmp_path)
    victim = tmp_path / "worker=0" / "part-000001.parquet"
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    with pytest.raises(EventLogError, match="part-000001.parquet: not a readable Parquet file"):
        ts.spark.read_event_log(spark, tmp_path)


def test_a_truncated_file_read_through_the_data_source_is_named(spark, tmp_path):
    write_log(tmp_path)
    victim = tmp_path / "worker=1" / "part-000001.parquet"
    victim.write_bytes(victim.read_bytes()[:100])
    with pytest.raises(EventLogError, match=f"^{victim}: not a readable Parquet file") as err:
        spark.read.format("timely").load(str(tmp_path)).collect()
    assert err.value.__cause__ is not None           # Spark's own error stays reachable


def test_an_open_last_epoch_is_not_reported(spark, tmp_path):
    write_log(tmp_path, epochs=3, open_last=True)
    assert counts(spark, tmp_path) == [(0, 6), (1, 6)]
    everything = ts.spark.read_event_log(spark, tmp_path, complete_only=False)
    assert everything.where("time = 2").count() == 6


def test_the_timely_data_source_reads_complete_times_only(spark, tmp_path):
    write_log(tmp_path, epochs=3, open_last=True)
    frame = spark.read.format("timely").load(str(tmp_path))
    assert frame.columns[:2] == ["time", "worker"] and {"epoch", "w", "n"} <= set(frame.columns)
    rows = frame.groupBy("time", "worker").count().collect()
    assert sorted((r["time"], r["worker"], r["count"]) for r in rows) == [(0, 0, 3), (0, 1, 3), (1, 0, 3), (1, 1, 3)]
    everything = spark.read.format("timely").option("complete_only", "false").load(str(tmp_path))
    assert everything.where("time = 2").count() == 6


def test_the_timely_data_source_with_product_times(spark, tmp_path):
    from timely_spark.capture import Messages, Progress

    writer = ParquetEventWriter(tmp_path, 0, 1, flush_seconds=0.0)
    writer.push(Messages(ts.Product(0, 1), [{"x": 1}]))
    writer.push(Messages(ts.Product(1, 0), [{"x": 2}]))
    writer.push(Progress([(ts.Product(0, 0), -1), (ts.Product(0, 2), 1), (ts.Product(1, 0), 1)]))
    writer.flush()
    rows = spark.read.format("timely").load(str(tmp_path)).collect()
    assert [(r["time"]["outer"], r["time"]["inner"], r["x"]) for r in rows] == [(0, 1, 1)]
