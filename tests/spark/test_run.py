"""ts.spark.run on local[2]: real barrier tasks, real sockets (``any_spark``: on a classic
session and over Spark Connect)."""

import pytest

import timely_spark as ts


def test_run_with_one_and_two_workers_in_order(any_spark):
    assert ts.spark.run(any_spark, lambda w: (w.index, w.peers), workers=1) == [(0, 1)]
    stats = {}
    assert ts.spark.run(any_spark, lambda w: (w.index, w.peers), workers=2, stats=stats) == [(0, 2), (1, 2)]
    assert len(stats["tasks"]) == 2 and all("connect_seconds" in t for t in stats["tasks"])
    assert all(t["met_through"] == "driver" and t["total"] >= t["compute"] for t in stats["tasks"])
    if not ts.spark.is_connect(any_spark):       # Spark's stage times: not readable over Connect
        assert all(t["stage_start"] is not None for t in stats["tasks"])


def test_a_loop_across_barrier_workers_with_exact_results(spark):
    def work(worker):
        def build(scope):
            start = scope.to_stream(range(1, 301) if scope.index == 0 else [])

            def loop(inner):
                handle, cycle = inner.feedback(1)
                state = start.map(lambda n: (n, n, 0)).enter(inner).concat(cycle)
                done, going = state.branch(lambda s: s[1] != 1)
                going.exchange(lambda s: s[1]).map(
                    lambda s: (s[0], s[1] // 2 if s[1] % 2 == 0 else 3 * s[1] + 1, s[2] + 1)).connect_loop(handle)
                return done.leave()

            return scope.iterative(loop)

        got = []
        worker.dataflow(lambda s: build(s).inspect(lambda s: got.append((s[0], s[2]))))
        return got

    def steps(n):
        k = 0
        while n != 1:
            n, k = (n // 2 if n % 2 == 0 else 3 * n + 1), k + 1
        return k

    results = ts.spark.run(spark, work, workers=2)
    assert sorted(x for part in results for x in part) == [(n, steps(n)) for n in range(1, 301)]


def test_an_error_in_a_worker_names_the_worker_and_keeps_the_traceback(any_spark):
    def work(worker):
        worker.dataflow(lambda s: s.to_stream([worker.index]).map(lambda x: 10 // (x - 1), name="Divide"))

    with pytest.raises(ts.WorkerError) as err:
        ts.spark.run(any_spark, work, workers=2)
    assert err.value.worker == 1 and err.value.operator == "Divide"
    assert "ZeroDivisionError" in str(err.value) and "10 // (x - 1)" in str(err.value)


def test_max_attempts_recovers_from_a_failure_injected_once(any_spark, tmp_path):
    marker = tmp_path / "failed-once"

    def work(worker):
        if worker.index == 1 and not marker.exists():
            marker.write_text("x")
            raise RuntimeError("injected failure")
        return worker.index * 10

    stats = {}
    assert ts.spark.run(any_spark, work, workers=2, max_attempts=2, stats=stats) == [0, 10]
    assert stats["attempts"] == 2 and marker.exists()
    marker.unlink()
    with pytest.raises(ts.WorkerError, match="injected failure"):
        ts.spark.run(any_spark, work, workers=2, max_attempts=1)


def test_preflight_refuses_more_workers_than_slots_at_once(any_spark):
    import time

    start = time.monotonic()
    with pytest.raises(ts.spark.SparkSetupError, match="3 task slots.*has 2"):
        ts.spark.run(any_spark, lambda w: None, workers=3, timeout=5)   # without the check: cancelled in ~20 s
    assert time.monotonic() - start < 10    # not Spark's minutes-long slot check
    with pytest.raises(ts.ParameterError, match="^workers must be a whole number >= 1, got 0$"):
        ts.spark.run(any_spark, lambda w: None, workers=0)


@pytest.mark.timeout(90)
def test_a_hung_worker_function_ends_at_its_timeout(any_spark):
    import time

    def work(worker):
        worker.dataflow(lambda s: s.new_input("Never"))
        while True:                      # the dataflow never completes: nobody advances the input
            worker.step()

    start = time.monotonic()
    with pytest.raises(ts.RunTimeout) as err:
        ts.spark.run(any_spark, work, workers=2, timeout=5)
    assert time.monotonic() - start < 5 + 30
    assert sorted(err.value.incomplete) == [0, 1] and "Dataflow0" in str(err.value)
    assert ts.spark.run(any_spark, lambda w: w.index, workers=2) == [0, 1]     # the slots are free again


def test_a_crashed_task_is_a_short_spark_job_error_leading_with_the_cause(spark):
    import os

    with pytest.raises(ts.spark.SparkJobError) as err:
        ts.spark.run(spark, lambda w: os._exit(3) if w.index == 1 else w.index, workers=2)
    lines = str(err.value).splitlines()
    assert lines[0].startswith("the barrier job failed: Python worker exited unexpectedly")
    assert len(lines) <= 6 and "\tat " not in str(err.value)          # a few lines, no Java stack
    assert err.value.__cause__ is not None                          # Spark's whole error stays reachable


def test_a_retried_crash_names_its_attempt_once(spark, tmp_path, caplog):
    import logging
    import os

    marker = tmp_path / "crashed-once"

    def work(worker):
        if worker.index == 1 and not marker.exists():
            marker.write_text("x")
            os._exit(3)
        return worker.index

    with caplog.at_level(logging.WARNING, logger="timely_spark.spark.runner"):
        assert ts.spark.run(spark, work, workers=2, max_attempts=2) == [0, 1]
    assert "attempt 1 of 2 failed (the barrier job failed: Python worker exited unexpectedly" in caplog.text
    assert caplog.text.count(" of 2") == 1                 # the counter said once
