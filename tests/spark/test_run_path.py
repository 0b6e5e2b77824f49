"""One run path on Spark: ts.spark.run and ts.spark.transform ship the run's Config
whole to every barrier task's worker (``worker.config``)."""

import logging

import pytest

import timely_spark as ts
from timely_spark.errors import ParameterError


def seen(worker):
    c = worker.config
    return [worker.index, c.timeout, c.peer_timeout, c.checkpoint, c.snapshot_every, c.process, c.processes]


def test_run_hands_every_worker_the_config(spark, tmp_path, monkeypatch):
    ckpt = str(tmp_path / "ckpt")
    monkeypatch.chdir(tmp_path)         # a relative checkpoint reaches the executors as the driver's absolute path
    got = ts.spark.run(spark, seen, workers=2, timeout=100, peer_timeout=45, checkpoint="ckpt", snapshot_every=30)
    assert got == [[i, 100.0, 45.0, ckpt, 30.0, i, 2] for i in range(2)]
    with pytest.raises(ParameterError, match="snapshot_every needs a checkpoint") as err:
        ts.spark.run(spark, seen, workers=2, snapshot_every=5)        # refused before any Spark job
    assert err.value.parameter == "snapshot_every"


def test_transform_hands_every_worker_the_config(spark):
    df = spark.range(4, numPartitions=2)

    def build(scope, stream):
        c = scope.worker.config
        row = {"worker": scope.index, "timeout": c.timeout, "peer_timeout": c.peer_timeout}
        return scope.to_stream([row])

    out = ts.spark.transform(df, build, "worker int, timeout double, peer_timeout double", rows=True,
                             timeout=100, peer_timeout=45)
    assert sorted(tuple(r) for r in out.collect()) == [(0, 100.0, 45.0), (1, 100.0, 45.0)]


def test_a_retry_with_a_checkpoint_says_where_it_resumes(spark, tmp_path, caplog):
    marker = tmp_path / "failed-once"

    def work(worker):
        if worker.index == 1 and not marker.exists():
            marker.write_text("x")
            raise RuntimeError("injected failure")
        return worker.config.checkpoint

    stats = {}
    ckpt = str(tmp_path / "ckpt")
    with caplog.at_level(logging.WARNING, logger="timely_spark.spark.runner"):
        assert ts.spark.run(spark, work, workers=2, max_attempts=2, checkpoint=ckpt, stats=stats) == [ckpt, ckpt]
    assert stats["attempts"] == 2 and [f["attempt"] for f in stats["failures"]] == [1]
    assert f"retrying: it starts from the beginning (no snapshot committed in {ckpt} yet)" in caplog.text
