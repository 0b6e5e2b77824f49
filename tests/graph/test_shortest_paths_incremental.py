"""shortest_paths_stream: a changelog of edges in, a changelog of distances out, equal
at every epoch to Dijkstra from scratch on the edges so far."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import timely_spark as ts
from timely_spark.graph import dijkstra_reference, shortest_paths_stream

from .changelogs import CANCEL_EPOCH, EMPTY_EPOCH, LAYOUTS, collection, fold, fold_upto, random_changelog, run_epochs

SOURCES = [0, 100, 200, 7, 24, 99_999]          # the path's start, the hub, a late one, one never present


def check_every_epoch(epochs: list, out: dict, weight) -> None:
    columns = ["src", "dst"] + ([weight] if weight else [])
    for epoch in range(len(epochs)):
        got = {k: v[0] for k, v in fold_upto(out, epoch, ["vertex", "source"]).items()}
        edges = collection(epochs, epoch, columns)
        present = set(edges["src"].to_pylist()) | set(edges["dst"].to_pylist())
        want = dijkstra_reference(edges["src"].to_pylist(), edges["dst"].to_pylist(),
                                  [s for s in SOURCES if s in present],
                                  edges[weight].to_pylist() if weight else None)
        assert got == want, epoch


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("weight", [None, "weight"])
def test_every_epoch_equals_dijkstra_from_scratch(layout, weight):
    epochs = random_changelog(5, weights=True)
    if weight is None:
        epochs = [t.select(["src", "dst", "diff"]) for t in epochs]
    out = run_epochs(epochs, lambda e: shortest_paths_stream(e, SOURCES, weight), **layout)
    check_every_epoch(epochs, out, weight)
    assert EMPTY_EPOCH not in out and CANCEL_EPOCH not in out       # no change, no rows
    if weight is None:
        assert all(t.schema.field("distance").type == pa.int64() for t in out.values())


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000))
def test_random_weighted_changelogs_property(seed):
    epochs = random_changelog(seed, weights=True)
    out = run_epochs(epochs, lambda e: shortest_paths_stream(e, SOURCES, "weight"), threads=2)
    check_every_epoch(epochs, out, "weight")


def test_an_edge_added_while_its_end_is_invalidated_does_not_hide_the_old_support():
    # x and y lose their distance in the same round; x -> v (old) is v's shortest path, the
    # new y -> v offers less from y's old distance: v must still go (nothing reaches it now)
    def table(src, dst, weight, diff):
        return pa.table({"src": np.array(src, np.int64), "dst": np.array(dst, np.int64),
                         "weight": np.array(weight, np.float64), "diff": np.array(diff, np.int64)})

    a, x, y, v, z = 1, 2, 3, 4, 5
    epochs = [table([0, 0, a, a, x], [z, a, x, y, v], [1.0, 1.0, 1.0, 1.0, 10.0], [1] * 5),
              table([0, y], [a, v], [1.0, 1.0], [-1, 1])]
    for layout in LAYOUTS:
        out = run_epochs(epochs, lambda e: shortest_paths_stream(e, [0], "weight"), **layout)
        got = {k: d[0] for k, d in fold_upto(out, 1, ["vertex", "source"]).items()}
        assert got == {(0, 0): 0.0, (z, 0): 1.0}, layout


@pytest.mark.slow
def test_inserts_touch_only_what_they_improve():
    path = np.arange(3000, dtype=np.int64)
    epochs = [pa.table({"src": path[:-1], "dst": path[1:]}),
              pa.table({"src": np.array([2990], np.int64), "dst": np.array([5000], np.int64)}),
              pa.table({"src": np.array([0], np.int64), "dst": np.array([2995], np.int64)})]
    out = run_epochs(epochs, lambda e: shortest_paths_stream(e, [0]), threads=2)
    assert out[1].num_rows == 1                          # the new vertex only
    assert out[2].num_rows == 2 * 5                      # 2995..2999 move closer: -old, +new


def test_a_reweighted_edge_without_withdrawal_is_a_parallel_edge():
    epochs = [pa.table({"src": [1, 2], "dst": [2, 3], "w": [5.0, 1.0]}),
              pa.table({"src": [1], "dst": [2], "w": [2.0]}),                  # lighter: counts
              pa.table({"src": [1], "dst": [2], "w": [9.0]}),                  # heavier: no change
              pa.table({"src": [1], "dst": [2], "w": [2.0], "diff": [-1]})]    # back to 5.0
    epochs = [t.cast(pa.schema([(f.name, pa.int64() if f.name != "w" else pa.float64()) for f in t.schema]))
              for t in epochs]
    out = run_epochs(epochs, lambda e: shortest_paths_stream(e, [1], "w"), threads=2)
    dist = {}
    for t in sorted(out):
        dist.update({(v, s): d for v, s, d, c in zip(*(out[t][c].to_pylist() for c in
                                                     ("vertex", "source", "distance", "diff"))) if c > 0})
        dist[t] = dict(dist)
    assert dist[1][(3, 1)] == 3.0 and 2 not in out and dist[3][(3, 1)] == 6.0


def test_bad_changelogs_raise_changelog_errors_naming_operator_time_and_row():
    added = pa.table({"src": np.array([1], np.int64), "dst": np.array([2], np.int64), "w": [1.0]})
    never = pa.table({"src": np.array([1], np.int64), "dst": np.array([2], np.int64), "w": [3.0],
                      "diff": np.array([-1], np.int64)})
    with pytest.raises(ts.WorkerError) as info:
        run_epochs([added, never], lambda e: shortest_paths_stream(e, [1], "w"))
    message = str(info.value.cause)
    assert isinstance(info.value.cause, ts.errors.ChangelogError)
    assert "ShortestPathsStream" in message and "time 1" in message and "src=1, dst=2, w=3.0" in message
    strings = added.append_column("diff", pa.array(["+1"]))
    with pytest.raises(ts.WorkerError) as info:
        run_epochs([strings], lambda e: shortest_paths_stream(e, [1], "w"))
    assert isinstance(info.value.cause, ts.errors.ChangelogError) and "time 0" in str(info.value.cause)


def test_a_withdrawal_that_changes_no_distance_emits_nothing():
    # 1->2->4 and 1->3->4: withdrawing 2->4 recomputes source 1, but no distance moves
    diamond = pa.table({"src": np.array([1, 2, 1, 3], np.int64), "dst": np.array([2, 4, 3, 4], np.int64)})
    cut = pa.table({"src": np.array([2], np.int64), "dst": np.array([4], np.int64), "diff": np.array([-1])})
    out = run_epochs([diamond, cut], lambda e: shortest_paths_stream(e, [1]), threads=2)
    assert 1 not in out


def test_zero_weight_cycle_through_a_source_keeps_its_own_distance():
    cycle = pa.table({"src": np.array([1, 2, 2], np.int64), "dst": np.array([2, 1, 3], np.int64),
                      "w": [0.0, 0.0, 1.0]})
    cut = pa.table({"src": np.array([2], np.int64), "dst": np.array([1], np.int64), "w": [0.0],
                    "diff": np.array([-1])})
    out = run_epochs([cycle, cut], lambda e: shortest_paths_stream(e, [1], "w"), threads=2)
    assert fold(out[0], ["vertex", "source"]) == {(1, 1): (0.0,), (2, 1): (0.0,), (3, 1): (1.0,)}
    assert 1 not in out                               # nothing changed


def test_distances_keep_new_pairs_in_a_side_level_without_copying_the_state():
    from timely_spark.graph.paths_incremental import _Distances

    dist, emitted = _Distances(), []
    v = np.arange(100, dtype=np.int64)
    dist.merge(v, np.zeros(100, np.int64), v.astype(float), emitted)             # 100 pairs: the main level
    new = np.array([1000, 5, 7], np.int64)
    dist.merge(new, np.array([0, 1, 1]), np.array([1.0, 2.0, 3.0]), emitted)     # new pairs: the side level
    assert len(dist.main) == 100 and len(dist.side) == 3
    got = dist.get(np.array([1000, 5, 5, 50, 9]), np.array([0, 1, 0, 0, 1]))
    assert got.tolist() == [1.0, 2.0, 5.0, 50.0, np.inf]
    improved = dist.merge(np.array([5, 50]), np.array([1, 0]), np.array([0.5, 0.5]), emitted)
    assert improved[2].tolist() == [0.5, 0.5] and len(dist.side) == 3
    assert dist.remove(np.array([5, 50]), np.array([1, 0]), emitted).tolist() == [0.5, 0.5]
    which, source, d = dist.of(np.array([5, 7, 1000]))
    assert sorted(zip(source.tolist(), d.tolist())) == [(0, 1.0), (0, 5.0), (0, 7.0), (1, 3.0)]
    dist.drop(np.array([1]), emitted)
    assert dist.get(np.array([7, 7]), np.array([1, 0])).tolist() == [np.inf, 7.0]
    rows = ts.collection(pa.concat_tables([pa.Table.from_batches([b]) for b in emitted]), counts=True)
    assert rows.num_rows == 100 and set(rows["count"].to_pylist()) == {1}     # 50 from 0 gone, 1000 from 0 in
