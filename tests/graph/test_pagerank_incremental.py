"""pagerank_stream: a changelog of edges in, a changelog of ranks out, within the
documented bound of the exact PageRank of the edges so far, at every epoch."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import timely_spark as ts
from timely_spark.graph import pagerank_reference, pagerank_stream

from .changelogs import CANCEL_EPOCH, EMPTY_EPOCH, LAYOUTS, collection, fold_upto, random_changelog, run_epochs

DAMPING = 0.85


def exact(edges: pa.Table) -> dict:
    if not edges.num_rows:
        return {}
    return pagerank_reference(edges["src"].to_numpy(), edges["dst"].to_numpy(), 400, DAMPING)


def check_every_epoch(epochs: list, out: dict, tolerance: float, output_tolerance: float = 0.0) -> float:
    """The documented contract at every epoch; returns the largest share of a vertex's
    rank by which the folded output strayed from the exact PageRank."""
    strayed = 0.0
    for epoch in range(len(epochs)):
        got = fold_upto(out, epoch, ["vertex"])
        want = exact(collection(epochs, epoch, ["src", "dst"]))
        assert set(got) == {(v,) for v in want}, epoch
        inner = 2 * len(want) * tolerance / (1 - DAMPING)
        shown = {v: got[(v,)][0] for v in want}
        for v, r in want.items():
            assert abs(shown[v] - r) <= output_tolerance * shown[v] + inner, (epoch, v, shown[v], r)
            strayed = max(strayed, abs(shown[v] - r) / r)
        error = sum(abs(shown[v] - r) for v, r in want.items())
        bound = output_tolerance * sum(shown.values()) + inner
        assert error <= bound, (epoch, error, bound)
    return strayed


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.slow
def test_every_epoch_within_the_bound_of_exact_pagerank(layout):
    epochs = [t.select(["src", "dst", "diff"]) for t in random_changelog(3)]
    tolerance = 1e-6
    out = run_epochs(epochs, lambda e: pagerank_stream(e, tolerance=tolerance, output_tolerance=0), **layout)
    check_every_epoch(epochs, out, tolerance)
    # an epoch that changes nothing emits nothing
    assert EMPTY_EPOCH not in out and CANCEL_EPOCH not in out


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), tolerance=st.sampled_from([1e-4, 1e-8]),
       output_tolerance=st.sampled_from([0.0, 0.1, 0.3]))
@pytest.mark.slow
def test_random_changelogs_property(seed, tolerance, output_tolerance):
    epochs = [t.select(["src", "dst", "diff"]) for t in random_changelog(seed, epochs=20)]
    out = run_epochs(epochs, lambda e: pagerank_stream(e, tolerance=tolerance, output_tolerance=output_tolerance),
                     threads=2)
    check_every_epoch(epochs, out, tolerance, output_tolerance)


@pytest.mark.parametrize("output_tolerance", [0.1, 0.3])
@pytest.mark.slow
def test_the_output_tolerance_holds_back_small_moves_within_its_bound(output_tolerance):
    # random changelogs with withdrawals, 2 workers: each folded rank within the stated
    # share of itself (plus the computation's bound), while some rank is really held back
    strayed, rows, rows_all = 0.0, 0, 0
    for seed in (11, 12, 13):
        epochs = [t.select(["src", "dst", "diff"]) for t in random_changelog(seed, epochs=20)]
        out = run_epochs(epochs, lambda e: pagerank_stream(e, tolerance=1e-10, output_tolerance=output_tolerance),
                         threads=2)
        strayed = max(strayed, check_every_epoch(epochs, out, 1e-10, output_tolerance))
        rows += sum(t.num_rows for t in out.values())
        every = run_epochs(epochs, lambda e: pagerank_stream(e, tolerance=1e-10, output_tolerance=0), threads=2)
        rows_all += sum(t.num_rows for t in every.values())
    assert strayed > output_tolerance / 10        # held back for real, not a tolerance never used
    assert rows < rows_all


def test_a_new_vertex_beside_a_big_graph_emits_its_own_rows():
    # a 2,000-vertex path, then one new edge between two new vertices: one vertex more
    # moves every rank's teleport share (by ~1e-3 of it), which the output tolerance holds back
    path = np.arange(2000, dtype=np.int64)
    epochs = [pa.table({"src": path[:-1], "dst": path[1:]}),
              pa.table({"src": np.array([5000], np.int64), "dst": np.array([5001], np.int64)})]
    out = run_epochs(epochs, lambda e: pagerank_stream(e, tolerance=1e-12), threads=2)
    assert sorted(out[1]["vertex"].to_pylist()) == [5000, 5001] and out[1]["diff"].to_pylist() == [1, 1]
    every = run_epochs(epochs, lambda e: pagerank_stream(e, tolerance=1e-12, output_tolerance=0), threads=2)
    assert every[1].num_rows == 2 * 2000 + 2                 # every rank moved: all re-emitted


def test_work_and_output_follow_the_change():
    # a long path then one new edge at its end: only vertices near it move by > tolerance
    path = np.arange(2000, dtype=np.int64)
    epochs = [pa.table({"src": path[:-1], "dst": path[1:]}),
              pa.table({"src": np.array([0], np.int64), "dst": np.array([5000], np.int64)})]
    out = run_epochs(epochs, lambda e: pagerank_stream(e, tolerance=1e-6, output_tolerance=0), threads=2)
    assert 0 < out[1].num_rows < 50          # not every vertex re-emitted


def test_bad_changelogs_raise_changelog_errors_naming_operator_time_and_row():
    def run(epochs):
        return run_epochs(epochs, lambda e: pagerank_stream(e), threads=1)

    added = pa.table({"src": np.array([1], np.int64), "dst": np.array([2], np.int64)})
    never = pa.table({"src": np.array([1, 7], np.int64), "dst": np.array([2, 8], np.int64),
                      "diff": np.array([-1, -1], np.int64)})
    with pytest.raises(ts.WorkerError) as info:
        run([added, never])
    assert isinstance(info.value.cause, ts.errors.ChangelogError)
    message = str(info.value.cause)
    assert "PageRankStream" in message and "time 1" in message and "src=7, dst=8" in message
    floats = pa.table({"src": np.array([1], np.int64), "dst": np.array([2], np.int64), "diff": [1.0]})
    with pytest.raises(ts.WorkerError) as info:
        run([floats])
    assert isinstance(info.value.cause, ts.errors.ChangelogError)
    assert "PageRankStream" in str(info.value.cause) and "integer" in str(info.value.cause)
    assert "time 0" in str(info.value.cause)


@pytest.mark.parametrize("bad", [dict(tolerance=0), dict(tolerance=None), dict(damping=1.0), dict(damping=-0.1),
                                 dict(output_tolerance=-0.1), dict(output_tolerance=1.5), dict(output_tolerance="1%")])
def test_parameters_are_checked(bad):
    with pytest.raises(ts.WorkerError) as info:
        ts.example(lambda s: pagerank_stream(s.to_stream(pa.table({"src": [1], "dst": [2]})), **bad))
    assert isinstance(info.value.cause, ts.ParameterError) and list(bad)[0] in str(info.value.cause)
