"""The DataFrame bridge (mapInArrow, barrier): Arrow batches and plain rows, both directions."""

import uuid

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import timely_spark as ts
from timely_spark.graph import union_find as components


def test_record_batches_in_and_out(any_spark):
    df = any_spark.createDataFrame([(i, i % 3) for i in range(20)], "id long, g long").repartition(2)

    def build(scope, batches):
        return batches.map(lambda rb: pa.record_batch(
            {"id": rb.column("id"), "square": pc.multiply(rb.column("id"), rb.column("id"))}))

    out = ts.spark.transform(df, build, "id long, square long")
    assert sorted(tuple(r) for r in out.collect()) == [(i, i * i) for i in range(20)]


def test_plain_rows_in_and_out_with_exchange_and_aggregation(spark):
    words = "a b a c b a".split()
    df = spark.createDataFrame([(w,) for w in words], "word string").repartition(2)

    def build(scope, rows):
        return (rows.map(lambda r: (r["word"], 1))
                .aggregate(lambda w, one, n: (n or 0) + one, lambda w, n: (w, n)))

    out = ts.spark.transform(df, build, "word string, n long", rows=True)
    assert sorted(tuple(r) for r in out.collect()) == [("a", 3), ("b", 2), ("c", 1)]


def test_connected_components_through_the_bridge(spark):
    edges = [(1, 2), (2, 3), (4, 5), (6, 6), (7, 8), (8, 9), (9, 7), (3, 10)]
    df = spark.createDataFrame(edges, "src long, dst long")
    got = {r["vertex"]: r["component"] for r in ts.graph.connected_components(df, workers=2).collect()}
    assert got == components(edges)


def test_worker_errors_in_the_bridge_name_the_worker(any_spark):
    df = any_spark.createDataFrame([(i,) for i in range(4)], "x long").repartition(2)

    def build(scope, rows):
        return rows.map(lambda r: {"x": 1 // (scope.index - 1)})

    with pytest.raises(ts.WorkerError, match="^worker 1, operator 'Map' failed: ZeroDivisionError") as err:
        ts.spark.transform(df, build, "x long", rows=True).collect()
    assert err.value.worker == 1 and "1 // (scope.index - 1)" in str(err.value)    # the original traceback


def last_stage_attempt(sc, group, action):
    """The highest stage attempt of the jobs ``action()`` ran (in job group ``group``)."""
    sc.setJobGroup(group, group)
    try:
        action()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    tracker = sc.statusTracker()
    stages = [s for j in tracker.getJobIdsForGroup(group) for s in tracker.getJobInfo(j).stageIds]
    attempts = [tracker.getStageInfo(s).currentAttemptId for s in stages if tracker.getStageInfo(s) is not None]
    assert attempts, f"no stage of job group {group!r} is known"
    return max(attempts)


def test_a_worker_error_ends_the_stage_without_spark_re_running_it(spark):
    # a re-run would fail the same way (and a partial one is refused): the driver cancels
    # the stage at the first report, so the barrier stage has one attempt, not Spark's four
    def fails():
        with pytest.raises(ts.WorkerError, match="^worker 1, operator 'Map' failed: ZeroDivisionError"):
            ts.spark.transform(spark.range(4).repartition(2),
                               lambda scope, s: s.map(lambda rb: rb if scope.index == 0 else 1 // 0),
                               "id long").collect()

    assert last_stage_attempt(spark.sparkContext, "a worker error", fails) == 0


def test_a_worker_error_does_not_run_the_users_code_again(any_spark, tmp_path):
    # classic: the driver cancels the stage; over Connect the client cannot, so Spark re-runs it,
    # but the rendezvous refuses the re-runs' tasks: worker 1's failing code ran once, not four times
    def build(scope, s):
        def fail(rb):
            (tmp_path / f"ran-{uuid.uuid4().hex}").touch()
            return 1 // 0

        return s.map(lambda rb: rb if scope.index == 0 else fail(rb))

    with pytest.raises(Exception, match="ZeroDivisionError"):
        ts.spark.transform(any_spark.range(4).repartition(2), build, "id long").collect()
    assert len(list(tmp_path.glob("ran-*"))) == 1


def test_wrong_output_records_are_a_clear_error_and_end_the_stage(spark):
    # a re-run would make the same records: the stage ends at the first report, as for a worker error
    def fails():
        with pytest.raises(ts.spark.SchemaMismatch, match=r"^worker \d: ts.spark.transform's output stream must carry "
                           r"pyarrow.RecordBatch records \(or pass rows=True\), got str"):
            ts.spark.transform(spark.createDataFrame([(1,)], "x long"), lambda scope, s: s.map(lambda rb: "nope"),
                               "x long").collect()

    assert last_stage_attempt(spark.sparkContext, "wrong output records", fails) == 0


@pytest.mark.slow
def test_output_reaches_spark_while_the_worker_runs(spark):
    """A worker's output is taken by its task as it is made, not when the worker ends:
    here the worker waits (bounded) for its first row to be taken before it finishes."""
    import threading
    import time

    def build(scope, rows):
        taken = threading.Event()

        class First:                # an output row; the task reads it (asDict) when it takes it
            def __init__(self, x):
                self.x = x

            def asDict(self):
                taken.set()
                return {"x": self.x, "taken": None}

        def await_taken(cap, info):
            held, deadline = [cap], []

            def logic(input, output):
                for t, batch in input:
                    output.session(t).give_batch([First(r["id"]) for r in batch])
                if held and not input.frontier.less_equal(held[0].time):      # all input seen
                    deadline.append(deadline[0] if deadline else time.monotonic() + 20)
                    if taken.is_set() or time.monotonic() > deadline[0]:
                        output.session(held[0]).give({"x": -1, "taken": taken.is_set()})
                        held.pop().drop()
                    else:
                        info.activate_after(0.05)
            return logic
        return rows.unary_frontier(None, "AwaitTaken", await_taken)

    out = ts.spark.transform(spark.range(1), build, "x long, taken boolean", rows=True, workers=1)
    assert sorted(tuple(r) for r in out.collect()) == [(-1, True), (0, None)]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_transform_that_never_completes_ends_at_its_timeout(spark):
    def build(scope, rows):
        def holds(cap, info):       # keeps its capability: the dataflow never completes
            def logic(input, output):
                for t, batch in input:
                    output.session(cap).give_batch(batch)
            return logic
        return rows.unary(None, "Holds", holds)

    def times_out():
        with pytest.raises(ts.RunTimeout) as err:
            ts.spark.transform(spark.range(4).repartition(2), build, "id long", rows=True, timeout=5).collect()
        assert sorted(err.value.incomplete) == [0, 1] and "Dataflow0" in str(err.value)   # each worker's own

    assert last_stage_attempt(spark.sparkContext, "a timeout", times_out) == 0      # not four timeouts


@pytest.mark.slow
@pytest.mark.timeout(240)     # without the stage boundary, the union waits out Spark's 10-minute slot check
def test_show_first_take_limit_tail_coalesce_and_union_on_a_result(spark, capsys):
    from pyspark.sql import functions as F

    def result():
        return ts.spark.transform(spark.range(10).repartition(2), lambda scope, s: s, "id long", workers=2)

    ids = set(range(10))
    result().show(3)
    assert "only showing top 3 rows" in capsys.readouterr().out
    assert result().first()["id"] in ids
    assert len({r["id"] for r in result().take(4)} & ids) == 4
    assert len(result().limit(5).collect()) == 5 and len(result().tail(2)) == 2
    assert sorted(r["id"] for r in result().coalesce(1).collect()) == sorted(ids)
    both = result().union(result())                  # two barrier stages of 2 tasks each, on 2 slots
    assert sorted(r["id"] for r in both.collect()) == sorted(list(ids) * 2)
    per_partition = result().select(F.spark_partition_id().alias("p"), "id").collect()
    assert len({r["p"] for r in per_partition}) == 2         # the workers' partitions, kept


def test_each_worker_output_stays_in_its_partition(spark):
    from pyspark.sql import functions as F

    df = spark.range(40).repartition(4)
    out = ts.spark.transform(df, lambda scope, s: s.map(lambda r: (scope.index, r["id"])), "worker long, id long",
                             rows=True, workers=2)
    rows = out.select(F.spark_partition_id().alias("p"), "worker").collect()
    assert len(rows) == 40 and all(r["p"] == r["worker"] for r in rows)


def test_a_worker_holds_a_few_output_batches_not_its_whole_output(any_spark):
    """One input row becomes 60 output batches of 1,000 rows, made over 60 activations
    (as a loop's rounds or later times would make them): the worker never holds more
    than OUTPUT_BATCHES_IN_FLIGHT of them (its peak of rows held, from stats=), and
    stats reports where the task's time went -- over Spark Connect too (sent through the
    driver's rendezvous; no stage start there)."""
    import numpy as np

    from timely_spark.spark.output_stream import OUTPUT_BATCHES_IN_FLIGHT

    batches, size = 60, 1000

    def build(scope, rows):
        def emit(cap, info):
            held, left = [cap], [batches]

            def logic(input, output):
                for _ in input:
                    pass
                if held and left[0]:
                    left[0] -= 1
                    output.session(held[0]).give(pa.record_batch({"x": np.full(size, left[0], np.int64)}))
                    info.activate()
                elif held:
                    held.pop().drop()
            return logic
        return rows.unary_frontier(None, "Explode", emit)

    stats: dict = {}
    out = ts.spark.transform(any_spark.range(1), build, "x long", workers=1, stats=stats)
    assert out.count() == batches * size
    [task] = stats["tasks"]
    assert task["rows_out"] == batches * size
    assert 0 < task["peak_rows_held"] <= OUTPUT_BATCHES_IN_FLIGHT * size
    assert set(task) >= {"stage_start", "rendezvous", "input", "compute", "output", "total"}
    assert (task["stage_start"] is None) == ts.spark.is_connect(any_spark) and task["total"] >= task["rendezvous"]
