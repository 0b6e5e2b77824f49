"""The incremental core's trace: property tests of accumulation under compaction."""
import itertools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timely_spark.dataflow.lattice import advance_by, coordinates, from_coordinates
from timely_spark.dataflow.trace import Trace
from timely_spark.progress import Product, less_equal

SHAPES = {1: 0, 2: Product(0, 0), 3: Product(Product(0, 0), 0)}

change = st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 2),
                   st.lists(st.integers(0, 3), min_size=3, max_size=3), st.integers(-2, 2))


def frontier_after(previous, proposed, dims):
    """``proposed`` moved to be at or beyond ``previous`` (frontiers only advance), minimal."""
    points = {tuple(max(a, b) for a, b in zip(f, g)) for f in proposed for g in previous} if previous else \
        {tuple(f) for f in proposed}
    return [p for p in points if not any(q != p and all(x <= y for x, y in zip(q, p)) for q in points)]


@settings(max_examples=150, deadline=None)
@given(dims=st.sampled_from([1, 2, 3]), changes=st.lists(change, max_size=40),
       cuts=st.lists(st.tuples(st.integers(0, 40), st.lists(st.lists(st.integers(0, 3), min_size=3, max_size=3),
                                                           min_size=1, max_size=3)), max_size=4),
       batch=st.integers(1, 7))
@pytest.mark.slow
def test_accumulation_at_every_time_beyond_the_frontier_is_the_fold_of_earlier_changes(dims, changes, cuts, batch):
    like = SHAPES[dims]
    trace = Trace(["k"], like, "Prop")
    frontier: list = []
    cuts = sorted(cuts)
    inserted: list = []

    def check():
        grid = itertools.product(range(5), repeat=dims)
        for point in grid:
            if frontier and not any(all(f <= p for f, p in zip(fr, point)) for fr in frontier):
                continue
            s = from_coordinates(point, like)
            expected: dict = {}
            for k, v, t, d in inserted:
                if less_equal(t, s):
                    expected[(k, v)] = expected.get((k, v), 0) + d
            expected = {kv: d for kv, d in expected.items() if d}
            got = trace.accumulate(pa.table({"k": ["a", "b", "c"]}), s)
            got = {} if got is None else {(r["k"], r["v"]): r["diff"] for r in got.to_pylist()}
            assert got == expected, (s, frontier)

    for start in range(0, len(changes), batch):
        part = changes[start:start + batch]
        while cuts and cuts[0][0] <= start:
            frontier = frontier_after(frontier, [f[:dims] for f in cuts.pop(0)[1]], dims)
            trace.advance([from_coordinates(f, like) for f in frontier])
        times = [from_coordinates(t[:dims], like) for *_, t, _ in part]
        table = pa.table({"k": [c[0] for c in part], "v": [c[1] for c in part],
                          "diff": pa.array([c[3] for c in part], pa.int64())})
        trace.insert(table, np.array([coordinates(t) for t in times], np.int64).reshape(len(part), dims))
        inserted += [(k, v, t, d) for (k, v, _, d), t in zip(part, times)]
        check()
    trace.compact()
    check()


@given(st.lists(st.lists(st.integers(0, 4), min_size=2, max_size=2), min_size=1, max_size=3),
       st.lists(st.integers(0, 4), min_size=2, max_size=2), st.lists(st.integers(0, 4), min_size=2, max_size=2))
def test_advance_by_keeps_the_order_with_every_time_beyond_the_frontier(frontier, t, s):
    advanced = advance_by(np.array([t]), np.array(frontier))[0]
    beyond = any(all(f <= x for f, x in zip(fr, s)) for fr in frontier)
    if beyond:
        assert all(a <= b for a, b in zip(t, s)) == all(a <= b for a, b in zip(advanced, s))
    assert all(a <= b for a, b in zip(t, advanced))


def test_compaction_folds_the_past_of_a_total_order_into_one_entry_per_row():
    trace = Trace(["k"], 0)
    for t in range(50):
        trace.advance([t])
        trace.insert(pa.table({"k": ["a"], "diff": [1 if t % 2 == 0 else -1]}), t)
    trace.compact()
    assert trace.rows == 0
    trace.insert(pa.table({"k": ["a"], "diff": [3]}), 50)
    trace.advance([51])
    trace.compact()
    assert trace.gather(pa.table({"k": ["a"]})).to_pylist() == [{"k": "a", "__t0": 51, "diff": 3}]


def test_a_changelog_operator_over_tuple_times_is_refused_when_built():
    """Tuple times (ordered lexicographically) have no lattice coordinates: distinct over
    them is the package's BuildError at build time, not a raw TypeError mid-run."""
    import timely_spark as ts

    def work(worker):
        def build(scope):
            inp, stream = scope.new_input()
            stream.distinct()
            return inp

        worker.dataflow(build, time=(0, 0))

    with pytest.raises(ts.WorkerError) as caught:
        ts.execute(work)
    assert isinstance(caught.value.__cause__, ts.BuildError), caught.value
    assert "lattice coordinates" in str(caught.value)
