"""``ts.spark.stream`` over Spark Connect (the test session's own Connect server, loopback),
with nothing reaching the JVM: the same expectations as the classic end-to-end test in
``test_stream_pipeline.py`` (whose bad-input, schema and graph stream form tests run on both
session kinds) -- equal to the batch computation at every complete epoch across a stop and a
restart, the output as a streaming DataFrame, slots held by a running pipeline refused, and
``stop()`` leaving no query, job or thread running; and, on both session kinds,
``last_progress``'s figures and ``shortest_paths_stream`` of a streaming DataFrame."""

import threading

import pytest

import timely_spark as ts
from timely_spark.errors import SparkSetupError

from .stream_pipeline_job import OUTPUT, counts, source
from .test_stream_pipeline import changes_by_epoch, check_every_epoch, edge_changes, table, write_files


def nothing_running(session):
    assert not session.streams.active
    assert not [t for t in threading.enumerate() if t.name == "timely_spark stream job"]


#: ``any_spark``'s Connect session only (its classic run is test_stream_pipeline.py's).
OVER_CONNECT = pytest.mark.parametrize("any_spark", ["connect"], indirect=True)


@pytest.mark.slow
@pytest.mark.timeout(600)
@OVER_CONNECT
def test_one_call_over_connect_equals_the_batch_computation_across_a_stop(any_spark, tmp_path):
    connect_spark = any_spark
    folder, root = tmp_path / "src", tmp_path / "ckpt"
    write_files(folder, 0, 4)
    with ts.spark.stream(source(connect_spark, folder), counts, OUTPUT, checkpoint=str(root),
                         snapshot_every=1.0) as pipe:
        assert pipe.workers == 1
        pipe.await_epoch(3, timeout=400)
        with pytest.raises(SparkSetupError, match=r"needs 2 task slots .*the session has 2, 1 of them held by "
                                                  r"running timely jobs"):
            ts.spark.stream(source(connect_spark, folder), counts, OUTPUT, checkpoint=str(tmp_path / "second"))
        query = pipe.start_output(pipe.df.writeStream.format("memory").queryName("stream_pipeline_connect_out"))
        query.processAllAvailable()
        progress = pipe.last_progress
    assert progress["epoch_in"] == progress["epoch_out"] == 3 and progress["lag_epochs"] == 0
    nothing_running(connect_spark)
    seen = connect_spark.table("stream_pipeline_connect_out").toArrow()       # the streaming DataFrame, diff and all
    assert seen.column_names == ["time", "worker", "word", "count_all", "n_sum", "diff"]
    assert changes_by_epoch(seen) == changes_by_epoch(table(connect_spark, root / "output"))

    write_files(folder, 4, 3)                                       # more input while it is stopped
    with ts.spark.stream(source(connect_spark, folder), counts, OUTPUT, checkpoint=str(root),
                         snapshot_every=1.0) as pipe:
        pipe.await_epoch(6, timeout=400)
    nothing_running(connect_spark)
    check_every_epoch(connect_spark, root, 7)                       # each epoch once across the stop


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_last_progress_has_its_figures_and_no_lag_once_the_output_caught_up(any_spark, tmp_path):
    folder, root = tmp_path / "src", tmp_path / "ckpt"
    write_files(folder, 0, 2)
    with ts.spark.stream(source(any_spark, folder), counts, OUTPUT, checkpoint=str(root)) as pipe:
        caught_up = pipe.await_epoch(1, timeout=400)     # both files in, nothing pending
        now = pipe.last_progress
    after = pipe.last_progress
    types = {"epoch_in": int, "epoch_out": int, "rows_in": int, "rows_out": int, "lag_epochs": int,
             "lag_seconds": float, "workers": int, "active": bool}
    for progress in (caught_up, now, after):
        assert {k: type(v) for k, v in progress.items()} == types
        assert progress["epoch_in"] == progress["epoch_out"] == 1
        assert progress["lag_epochs"] == 0 and progress["lag_seconds"] == 0.0
        assert progress["rows_in"] == table(any_spark, root / "input").num_rows > 0
        assert progress["rows_out"] == table(any_spark, root / "output").num_rows > 0
    assert now["active"] and not after["active"] and pipe.progress == after
    assert "epoch 1 in, 1 out" in repr(pipe) and "lag 0 epochs" in repr(pipe)
    nothing_running(any_spark)


@pytest.mark.timeout(300)
@OVER_CONNECT
def test_over_connect_a_pipeline_stopped_as_soon_as_it_started_leaves_nothing_running(any_spark, tmp_path):
    write_files(tmp_path / "src", 0, 2)
    pipe = ts.spark.stream(source(any_spark, tmp_path / "src"), counts, OUTPUT, checkpoint=str(tmp_path / "ckpt"))
    pipe.stop()
    assert not pipe.is_active
    nothing_running(any_spark)
    with ts.spark.stream(source(any_spark, tmp_path / "src"), counts, OUTPUT,
                         checkpoint=str(tmp_path / "ckpt")) as pipe:     # its slot is free again
        pipe.await_epoch(1, timeout=240)
    check_every_epoch(any_spark, tmp_path / "ckpt", 2)


def hops(edges, sources):
    """``{(vertex, source): hops}`` over the directed ``edges`` (breadth first)."""
    out = {}
    for s in sources:
        frontier, seen = [s], {s: 0}
        while frontier:
            reached = {d: seen[a] + 1 for a, d in edges if a in frontier and d not in seen}
            seen.update(reached)
            frontier = list(reached)
        out.update({(v, s): n for v, n in seen.items()})
    return out


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_shortest_paths_stream_of_a_streaming_dataframe_equals_breadth_first_search(any_spark, tmp_path):
    epochs = [[("a", "b", 1), ("b", "c", 1), ("x", "y", 1)],
              [("a", "c", 1), ("c", "d", 1)],
              [("a", "c", -1), ("b", "c", -1), ("y", "d", 1)]]
    edges = edge_changes(any_spark, tmp_path / "src", epochs)
    with ts.graph.shortest_paths_stream(edges, ["a", "x"], checkpoint=str(tmp_path / "ckpt")) as pipeline:
        pipeline.await_epoch(len(epochs) - 1, timeout=400)
    nothing_running(any_spark)
    output = table(any_spark, tmp_path / "ckpt" / "output")
    held = {}
    for e, rows in enumerate(epochs):
        for s, d, c in rows:
            held[(s, d)] = held.get((s, d), 0) + c
        want = hops([k for k, n in held.items() if n > 0], ["a", "x"])
        got = ts.collection(output.drop_columns(["worker"]), as_of=e).to_pylist()
        assert sorted((r["vertex"], r["source"], r["distance"]) for r in got) == sorted(
            (v, s, n) for (v, s), n in want.items()), e
