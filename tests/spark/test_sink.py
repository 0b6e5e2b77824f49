"""df.writeStream.format("timely"): micro-batches land as epochs (epoch = batch id), exactly
once across a failure injected in the commit and a restart from the checkpoint; a batch
run again after its commit succeeded leaves the log as it was; an aborted batch leaves
nothing visible; bad input fails naming the column or the path.

A real file source feeds each query one file per micro-batch; every wait is bounded;
no test asserts a timing."""

import json
import os
import shutil
import time
from pathlib import Path

import pytest

import timely_spark as ts
from timely_spark.capture import Messages, ParquetEventWriter, Progress
from timely_spark.errors import EventLogError

SCHEMA = "id long, email string"


def add_file(src, n, ids):
    """One input file (a micro-batch's worth), its modification time after the last."""
    path = Path(src) / f"in-{n:03d}.json"
    tmp = Path(src) / f".in-{n:03d}.tmp"
    tmp.write_text("".join(json.dumps({"id": i, "email": f"e{i}"}) + "\n" for i in ids))
    os.utime(tmp, (1_000_000 + n, 1_000_000 + n))
    os.replace(tmp, path)


def run_query(spark, src, log, ckpt, partitions):
    """Run the sink over every file in ``src`` (one per micro-batch), then stop;
    returns the query's exception, or None."""
    df = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(src))
          .repartition(partitions))
    query = df.writeStream.format("timely").option("checkpointLocation", str(ckpt)).start(str(log))
    try:
        query.processAllAvailable()
    except Exception as exc:
        return exc
    finally:
        query.stop()
    return None


def written(spark, tmp_path, batches, partitions):
    """A query that wrote one micro-batch of ids per element of ``batches`` to a new log,
    then stopped; returns its source, log and checkpoint paths."""
    src, log, ckpt = tmp_path / "src", tmp_path / "log", tmp_path / "ckpt"
    src.mkdir()
    ts.spark.register(spark)
    for n, ids in enumerate(batches):
        add_file(src, n, ids)
    assert run_query(spark, src, log, ckpt, partitions) is None
    return src, log, ckpt


def epochs(spark, log):
    rows = ts.spark.read_event_log(spark, log).select("time", "id").collect()
    out = {}
    for r in rows:
        out.setdefault(r["time"], []).append(r["id"])
    return {t: sorted(ids) for t, ids in out.items()}


@pytest.mark.slow
@pytest.mark.timeout(300)      # five streaming queries (and the session's start when it runs first)
def test_batches_land_as_epochs_once_across_a_failed_commit_and_a_restart(any_spark, tmp_path):
    src, log, ckpt = written(any_spark, tmp_path, [range(0, 7), range(7, 12)], partitions=3)
    assert epochs(any_spark, log) == {0: list(range(7)), 1: list(range(7, 12))}
    assert ts.spark.event_log_frontier(any_spark, log).elements() == [2]

    # batch 2's commit fails halfway: its first data file is put in place, its second
    # cannot be (a directory stands where it goes) -- a real failure
    add_file(src, 2, range(12, 20))
    blocker = log / "worker=0" / "part-000009.parquet"      # 2 epochs of 3 tasks + 1 progress file each: 8, 9, 10
    blocker.mkdir()
    failure = run_query(any_spark, src, log, ckpt, partitions=3)
    assert failure is not None and "part-000009.parquet" in str(failure)
    blocker.rmdir()
    assert (log / "worker=0" / "part-000008.parquet").is_file()          # in place, but no progress file says so
    assert epochs(any_spark, log) == {0: list(range(7)), 1: list(range(7, 12))}   # nothing of batch 2 visible
    assert ts.spark.event_log_frontier(any_spark, log).elements() == [2]

    # restart from the checkpoint (with fewer partitions): batch 2 is run again and
    # replaces what the failed commit left (files past its one data file and progress)
    assert run_query(any_spark, src, log, ckpt, partitions=1) is None
    assert epochs(any_spark, log) == {0: list(range(7)), 1: list(range(7, 12)), 2: list(range(12, 20))}
    assert ts.spark.event_log_frontier(any_spark, log).elements() == [3]
    assert not any((log / "_sink" / "staging").glob("*/*/*.parquet"))

    ts.spark.close_sink_log(log)
    assert ts.spark.event_log_frontier(any_spark, log).elements() == []
    add_file(src, 4, [99])
    failure = run_query(any_spark, src, log, ckpt, partitions=1)
    assert failure is not None and "closed" in str(failure)


def files(log):
    """Every file of the log (staging and the sink's state included), with its bytes."""
    return {str(p.relative_to(log)): p.read_bytes() for p in sorted(log.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_batch_run_again_after_its_commit_succeeded_leaves_the_log_as_it_was(spark, tmp_path):
    """The driver stopped after batch 1's commit reached the log but before Spark
    recorded it in the checkpoint: the restarted query runs batch 1 again, and the
    log stays as it was -- same frontier, same rows, not a byte changed."""
    src, log, ckpt = written(spark, tmp_path, [range(0, 4), range(4, 9)], partitions=2)
    before = files(log)
    for name in ("1", ".1.crc"):                      # Spark's record that batch 1 was committed
        (ckpt / "commits" / name).unlink(missing_ok=True)
    assert run_query(spark, src, log, ckpt, partitions=2) is None
    assert (ckpt / "commits" / "1").exists()          # batch 1 did run (and commit) again
    assert files(log) == before
    assert epochs(spark, log) == {0: list(range(4)), 1: list(range(4, 9))}
    assert ts.spark.event_log_frontier(spark, log).elements() == [2]


def test_an_aborted_batch_leaves_nothing_visible(spark, tmp_path):
    from pyspark.sql import functions as F

    src, log, ckpt = tmp_path / "src", tmp_path / "log", tmp_path / "ckpt"
    src.mkdir()
    ts.spark.register(spark)
    add_file(src, 0, range(5))
    add_file(src, 1, [5, 6, -1])            # -1 fails its task: the batch is aborted

    staged = str(log / "_sink" / "staging" / "epoch=1" / "*" / "*.parquet")

    @F.udf("long")
    def checked(i):
        if i < 0:      # fails once the other task of the batch has staged its file: no task outlives the abort
            import glob
            import time

            deadline = time.monotonic() + 60
            while not glob.glob(staged) and time.monotonic() < deadline:
                time.sleep(0.05)
            raise ValueError("bad id")
        return i

    df = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(src))
          .repartition(2).withColumn("id", checked("id")))
    query = df.writeStream.format("timely").option("checkpointLocation", str(ckpt)).start(str(log))
    with pytest.raises(Exception, match="bad id"):
        query.processAllAvailable()
    query.stop()
    assert epochs(spark, log) == {0: [0, 1, 2, 3, 4]}
    assert ts.spark.read_event_log(spark, log, complete_only=False).count() == 5
    assert not any((log / "_sink" / "staging").glob("*/*/*.parquet"))


@pytest.mark.parametrize("select, column", [(["id", "email AS time"], "'time'"),
                                            (["id", "make_interval(0, 0, 0, 0, 0, 0, id) AS gap"], "'gap'")])
def test_a_column_the_log_cannot_hold_fails_naming_it(spark, tmp_path, select, column):
    src = tmp_path / "src"
    src.mkdir()
    ts.spark.register(spark)
    add_file(src, 0, [1])
    df = spark.readStream.schema(SCHEMA).json(str(src)).selectExpr(*select)
    query = df.writeStream.format("timely").option("checkpointLocation", str(tmp_path / "ckpt")) \
        .start(str(tmp_path / "log"))
    with pytest.raises(Exception, match=column):
        query.processAllAvailable()
    query.stop()


def test_a_path_holding_another_log_fails_naming_it(spark, tmp_path):
    src, log = tmp_path / "src", tmp_path / "captured"
    src.mkdir()
    ts.spark.register(spark)
    add_file(src, 0, [1])
    writer = ParquetEventWriter(log, flush_seconds=0.0)
    writer.push(Messages(0, [{"x": 1}]))
    writer.push(Progress([(0, -1)]))
    writer.close()
    df = spark.readStream.schema(SCHEMA).json(str(src))
    query = df.writeStream.format("timely").option("checkpointLocation", str(tmp_path / "ckpt")).start(str(log))
    with pytest.raises(Exception, match="captured.*timely job captured"):
        query.processAllAvailable()
    query.stop()
    with pytest.raises(EventLogError, match="not an event log written by a Structured Streaming sink"):
        ts.spark.close_sink_log(log)
    shutil.rmtree(log)


@pytest.mark.slow
def test_compaction_in_the_sink_while_a_readstream_reads_each_epoch_once(spark, tmp_path):
    src, log = tmp_path / "src", tmp_path / "log"
    src.mkdir()
    ts.spark.register(spark)
    for n in range(4):
        add_file(src, n, range(n * 10, n * 10 + 3))
    got = []

    def collect(frame, batch_id):
        got.extend((r["time"], r["id"]) for r in frame.collect())

    reader = (spark.readStream.format("timely").schema("time long, worker long, id long, email string")
              .load(str(log)).writeStream.option("checkpointLocation", str(tmp_path / "ckpt-read"))
              .foreachBatch(collect).start())
    df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(src)).repartition(2)
    sink = (df.writeStream.format("timely").option("compact_every", "4")
            .option("checkpointLocation", str(tmp_path / "ckpt")).start(str(log)))
    try:
        sink.processAllAvailable()
        # The reader started before the log had data: a trigger of it that found nothing may end
        # just after processAllAvailable began and end that wait (Spark's own race), so wait again.
        deadline = time.monotonic() + 120
        while len(got) < 12 and time.monotonic() < deadline:
            reader.processAllAvailable()
        reader.processAllAvailable()
    finally:
        sink.stop()
        reader.stop()
    assert sorted(got) == [(n, n * 10 + i) for n in range(4) for i in range(3)]
    assert any("-" in p.name[len("part-"):] for p in (log / "worker=0").glob("part-*.parquet"))   # compacted
    assert epochs(spark, log) == {n: [n * 10 + i for i in range(3)] for n in range(4)}


@pytest.mark.slow
def test_a_second_query_on_the_path_fails_instead_of_being_skipped(spark, tmp_path):
    """Its batch ids start at 0 again: before, its first batches were taken for epochs
    complete already and dropped without a word."""
    src, log = tmp_path / "src", tmp_path / "log"
    src.mkdir()
    ts.spark.register(spark)
    add_file(src, 0, range(3))
    assert run_query(spark, src, log, tmp_path / "ckpt-a", partitions=2) is None
    other = tmp_path / "src-b"
    other.mkdir()
    add_file(other, 0, [100, 101])
    failure = run_query(spark, other, log, tmp_path / "ckpt-b", partitions=2)     # another checkpoint: another query
    assert failure is not None and "one query writes one log" in str(failure)
    assert epochs(spark, log) == {0: [0, 1, 2]}
    add_file(src, 1, [3])                   # the log's own query goes on
    assert run_query(spark, src, log, tmp_path / "ckpt-a", partitions=2) is None
    assert epochs(spark, log) == {0: [0, 1, 2], 1: [3]}
