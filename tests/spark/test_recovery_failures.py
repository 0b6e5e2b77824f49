"""Failure tests of snapshots and recovery: a stateful streaming dataflow (running group_by, running
join, delay, incremental components) fed from a followed log, on ``ts.execute(processes=2)``
with a checkpoint; one worker process is SIGKILLed at chosen points -- in the middle of
processing or of a snapshot being written -- and the run is started again with the same
checkpoint until it completes.  The output logs, read by Spark (batch; in the slow test
also a streaming query running across every failure), equal a run without failures
exactly: every epoch once, the same rows.  The harness is in :mod:`tests.spark.failures`."""

import random
import threading
from collections import Counter

import pytest

import timely_spark as ts
from tests.spark.failures import OUTPUTS, InputFeeder, pipeline, read_outputs, run_until_done

EPOCHS = 8
SLOW_EPOCHS = 40
KILLS = 12
ATTEMPT_TIMEOUT = 120.0


@pytest.fixture(scope="module")
def reference(spark, tmp_path_factory):
    """``reference(epochs)``: the outputs of a run without failures (nor checkpoint) over
    the whole input of ``epochs`` epochs."""
    done = {}

    def outputs(epochs):
        if epochs not in done:
            root = tmp_path_factory.mktemp("reference")
            InputFeeder(root / "input", epochs, 0.0).run()
            ts.execute(pipeline(str(root / "input"), str(root / "out")), processes=2, timeout=ATTEMPT_TIMEOUT)
            done[epochs] = read_outputs(spark, root / "out")
        return done[epochs]

    return outputs


class StreamedRows:
    """A Spark streaming query over one output log, running across the failures: every
    row each micro-batch delivered."""

    SCHEMA = {"totals": "time long, worker long, k long, v_sum long, count_all long, diff long"}

    def __init__(self, spark, path, name="totals"):
        self.rows, self.lock = Counter(), threading.Lock()
        columns = ["time"] + OUTPUTS[name].names

        def collect(frame, batch_id):
            got = Counter(tuple(r) for r in frame.select(*columns).collect())
            with self.lock:
                self.rows.update(got)

        self.query = (spark.readStream.format("timely").schema(self.SCHEMA[name]).load(str(path / name))
                      .writeStream.trigger(processingTime="200 milliseconds").foreachBatch(collect)
                      .option("checkpointLocation", str(path.parent / f"ckpt-{name}")).start())

    def finish(self):
        self.query.processAllAvailable()
        self.query.stop()
        return self.rows


def recover(spark, tmp_path, kills, epochs, interval, hold=None, per_attempt=0, snapshot_every=0.1, stream=True):
    root = tmp_path
    feeder = InputFeeder(root / "input", epochs, interval, hold=(hold, root / "checkpoint") if hold else None,
                         allowed=0 if per_attempt else None)
    feeder.start()
    (root / "out").mkdir()
    streamed = StreamedRows(spark, root / "out") if stream else None
    try:
        counts = run_until_done(root / "input", root / "out", root / "checkpoint", kills, snapshot_every=snapshot_every,
                                timeout=ATTEMPT_TIMEOUT, feeder=feeder, per_attempt=per_attempt)
    finally:
        feeder.allow(epochs)            # a run that failed otherwise leaves it waiting for leave to write
        feeder.join()
    assert feeder.error is None
    return counts, read_outputs(spark, root / "out"), streamed.finish() if streamed else None


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_one_sigkill_then_restore_writes_every_epoch_once(spark, tmp_path, reference):
    # snapshots a second apart: the crashed run completes epochs after the one restored (the log is ahead of it)
    counts, outputs, streamed = recover(spark, tmp_path, [("batch", 1, 3, True)], EPOCHS, 0.1, hold=EPOCHS - 3,
                                        snapshot_every=1.0, stream=False)
    reference = reference(EPOCHS)
    print(counts)
    assert counts["failures"] == 1 and counts["restored"] is not None     # the kill, then a restore
    for name in OUTPUTS:
        assert outputs[name] == reference[name], name


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_many_random_sigkills_write_every_epoch_once(spark, tmp_path, reference):
    seed = random.randrange(1 << 30)
    rnd = random.Random(seed)
    kills = [("batch", rnd.randrange(2), rnd.randrange(1, 4), True) if rnd.random() < 0.6
             else ("save", rnd.randrange(2), rnd.randrange(1, 4)) for _ in range(KILLS)]
    counts, outputs, streamed = recover(spark, tmp_path, kills, SLOW_EPOCHS, 0.05, per_attempt=3)
    reference = reference(SLOW_EPOCHS)
    print(seed, kills, counts)
    assert counts["failures"] >= 1, (seed, kills, counts)
    for name in OUTPUTS:
        assert outputs[name] == reference[name], (name, seed, kills)
    assert streamed == reference["totals"], (seed, kills)       # a streaming reader across every failure
