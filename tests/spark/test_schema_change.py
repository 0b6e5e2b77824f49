"""format("timely") reads given a schema the log's files do not have -- a column missing
(the log's columns changed, or a stream over a log not started yet was given the wrong
schema), or of another kind: EventLogError naming the column, the file and the times of
its rows, in a batch read and in a stream (never Spark's raw Python error)."""

import pytest

from timely_spark.capture import EventLogError, Messages, ParquetEventWriter, Progress


def epochs(path, first, last, column="n"):
    writer = ParquetEventWriter(path, 0, 1, flush_seconds=0.0)
    for e in range(first, last):
        writer.push(Messages(e, [{"w": 0, column: e * 10 + k} for k in range(3)]))
        writer.push(Progress([(e, -1), (e + 1, 1)]))
    return writer


@pytest.mark.timeout(240)
@pytest.mark.parametrize("columns, error", [
    ("w long, amount long", r"part-\d+\.parquet: no column 'amount' in its rows at time 0 \(they have 'w', 'n'\), "
                            r"but the read's schema names it"),
    ("w long, n string", r"column 'n' holds int64, but the read's schema says string \(its rows at time 0\)"),
], ids=["missing", "other kind"])
def test_a_batch_read_given_other_columns_names_the_column_the_file_and_the_time(spark, tmp_path, columns, error):
    epochs(tmp_path, 0, 1)
    frame = spark.read.format("timely").schema(f"time long, worker long, {columns}").load(str(tmp_path))
    with pytest.raises(EventLogError, match=error):
        frame.collect()


@pytest.mark.timeout(240)
@pytest.mark.slow
def test_a_stream_whose_log_comes_with_other_columns_fails_naming_the_column(spark, tmp_path):
    """The stream starts on a log with no files, given its schema; the writer then writes
    other columns: the micro-batch fails with EventLogError, not a KeyError from a Python worker."""
    log = tmp_path / "log"
    query = (spark.readStream.format("timely").schema("time long, worker long, w long, n long").load(str(log))
             .writeStream.format("memory").queryName("schema_change")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        query.processAllAvailable()
        epochs(log, 0, 1, column="amount")
        with pytest.raises(EventLogError, match=r"no column 'n' in its rows at time 0 \(they have 'w', 'amount'\)"):
            query.processAllAvailable()
    finally:
        query.stop()


def test_a_followed_log_whose_writer_changed_columns_names_them_the_file_and_the_time(tmp_path):
    """Worker 1 of a log writes other columns than worker 0: ts.capture.follow fails naming
    the columns, the file and the time, not with rows of two shapes in one stream."""
    import timely_spark as ts

    first, second = ParquetEventWriter(tmp_path, 0, 2, flush_seconds=0.0), ParquetEventWriter(tmp_path, 1, 2,
                                                                                                flush_seconds=0.0)
    first.push(Messages(0, [{"w": 0, "n": 1}]))
    second.push(Messages(0, [{"w": 1, "amount": 2.5}]))
    for writer in (first, second):
        writer.push(Progress([(0, -1)]))

    def work(worker):
        probe = worker.dataflow(lambda scope: ts.capture.follow(str(tmp_path), scope).probe())
        worker.step_while(lambda: not probe.done())

    with pytest.raises(ts.WorkerError) as info:
        ts.execute(work, timeout=60)
    assert isinstance(info.value.cause, EventLogError)
    assert ("worker=1/part-000000.parquet: its columns differ from the rest of the log: column 'n' is missing; "
            "column 'amount' is new (its rows at time 0)") in str(info.value.cause)
