"""A long-running timely job on Spark (barrier workers following a live log; the whole
pipeline in one call, ts.spark.stream, is tests/spark/test_stream_pipeline.py):
cancelling the caller's job group stops it; while it holds its slots a second job (or
a job leaving a streaming query no slot) fails at once with SparkSetupError instead of
waiting.

Every wait is bounded; no test asserts a timing."""

import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

import timely_spark as ts
from timely_spark.capture import Messages, ParquetEventWriter, Progress, follow
from timely_spark.errors import SparkJobError, SparkSetupError

WAIT = 60.0


def follow_and_capture(inp, out):
    """A worker function: follow log ``inp``, capture what it shows (times doubled) into
    log ``out``, until ``inp`` is closed."""
    def work(worker):
        writer = ParquetEventWriter(out, worker=worker.index, peers=worker.peers, flush_seconds=0.05)

        def build(scope):
            stream = follow(inp, scope, poll=0.02).map(lambda r: {"n": r["n"] * 2})
            stream.capture_into(writer)
            return stream.probe()

        probe = worker.dataflow(build)
        worker.step_while(lambda: not probe.done())
        writer.close()
        return worker.index

    return work


def wait_for(condition, what):
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"not within {WAIT} s: {what}"
        time.sleep(0.05)


@contextmanager
def caller_group(spark, name):
    """The calling thread's Spark jobs in job group ``name`` (over Connect: tagged ``name``)."""
    if ts.spark.is_connect(spark):
        spark.addTag(name)
        try:
            yield
        finally:
            spark.removeTag(name)
        return
    spark.sparkContext.setJobGroup(name, "a long-running timely job", interruptOnCancel=True)
    try:
        yield
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)


def cancel_group(spark, name):
    if ts.spark.is_connect(spark):
        spark.interruptTag(name)
    else:
        spark.sparkContext.cancelJobGroup(name)


@pytest.mark.slow
def test_a_cancelled_job_group_stops_it_and_held_slots_fail_a_second_job_at_once(any_spark, tmp_path):
    inp, out = str(tmp_path / "in"), str(tmp_path / "out")
    source = ParquetEventWriter(inp, flush_seconds=0.0)       # stays open: the job would run forever
    source.push(Messages(0, [{"n": 1}]))
    source.push(Progress([(0, -1), (1, 1)]))
    outcome = {}

    def long_running():
        with caller_group(any_spark, "streaming-test"):
            try:
                ts.spark.run(any_spark, follow_and_capture(inp, out), workers=2, timeout=WAIT)
            except Exception as exc:
                outcome["error"] = exc

    job = threading.Thread(target=long_running, daemon=True)
    job.start()
    wait_for(lambda: all((Path(out) / f"worker={w}").is_dir() for w in range(2)), "the job started")
    with pytest.raises(SparkSetupError, match="held by running timely jobs"):
        ts.spark.run(any_spark, lambda worker: worker.index, workers=1)
    cancel_group(any_spark, "streaming-test")
    job.join(WAIT)
    assert not job.is_alive()
    assert isinstance(outcome.get("error"), SparkJobError) and "cancelled" in str(outcome["error"])
    assert ts.spark.run(any_spark, lambda worker: worker.index, workers=2) == [0, 1]    # the slots are free again


def test_a_job_leaving_a_streaming_query_no_slot_fails_at_once(spark, tmp_path):
    (tmp_path / "src").mkdir()
    query = (spark.readStream.schema("n long").json(str(tmp_path / "src"))
             .writeStream.format("memory").queryName("starved").start())
    try:
        with pytest.raises(SparkSetupError, match="1 active streaming queries"):
            ts.spark.run(spark, lambda worker: worker.index, workers=2)
        assert ts.spark.run(spark, lambda worker: worker.index) == [0]     # default: the free slots
    finally:
        query.stop()


def test_slots_held_by_a_running_transform_fail_a_job_at_once(spark, tmp_path):
    flag = tmp_path / "release"

    def build(scope, stream):
        def held(batch):        # the barrier stage holds its slots until the test releases it
            deadline = time.monotonic() + WAIT
            while not flag.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            return batch
        return stream.map(held)

    started = tmp_path / "started"
    frame = spark.range(4).repartition(2)
    result = ts.spark.transform(frame, lambda s, stream: build(s, stream.inspect(lambda b: started.touch())),
                                "id long", workers=2)
    done = {}
    job = threading.Thread(target=lambda: done.setdefault("rows", result.count()), daemon=True)
    job.start()
    try:
        wait_for(started.exists, "the transform's barrier stage runs")
        with pytest.raises(SparkSetupError, match="2 held by running timely jobs"):
            ts.spark.run(spark, lambda worker: worker.index, workers=1)
    finally:
        flag.touch()
        job.join(WAIT)
    assert done.get("rows") == 4
    assert ts.spark.run(spark, lambda worker: worker.index, workers=2) == [0, 1]    # the slots are free again
