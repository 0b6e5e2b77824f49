"""Loops: real computations with exact results, nested loops, projection to the parent."""

import pytest

import timely_spark as ts
from timely_spark import Product
from timely_spark.testing import collect

from .helpers import collatz_dataflow, collatz_steps


@pytest.mark.parametrize("threads", [1, 2])
def test_collatz_step_counts_of_1_to_1000(threads):
    out = collect(lambda scope: collatz_dataflow(scope, range(1, 1001)), threads=threads)
    assert sorted(x for _, x in out) == [(n, collatz_steps(n)) for n in range(1, 1001)]
    assert {t for t, _ in out} == {0}       # all results leave at the outer time 0


@pytest.mark.parametrize("threads", [1, 3])
def test_reachability_by_iteration(threads):
    edges = [(0, 1), (1, 2), (2, 0), (2, 3), (4, 5), (5, 6), (7, 7)]
    expected = {0, 1, 2, 3}

    def build(scope):
        roots = scope.to_stream([0] if scope.index == 0 else [])
        graph = scope.to_stream(edges if scope.index == 0 else [])

        def loop(inner):
            handle, cycle = inner.feedback(1)
            frontier = roots.enter(inner).concat(cycle)
            es = graph.enter(inner)

            def constructor(cap, info):
                cap.drop()
                adj, reached = {}, set()
                pending = []

                def logic(nodes, edge_in, out):
                    for t, batch in edge_in:
                        for a, b in batch:
                            adj.setdefault(a, []).append(b)
                    for t, batch in nodes:
                        pending.append((t.retain(), batch))
                    # expand only once every edge has arrived
                    if not edge_in.frontier.is_empty():
                        return
                    for cap, batch in pending:
                        new = [n for n in batch if n not in reached]
                        reached.update(new)
                        out.session(cap).give_batch([m for n in new for m in adj.get(n, ())])
                        out.session(cap).give_batch([("reached", n) for n in new])
                        cap.drop()
                    pending.clear()

                return logic

            step = frontier.binary_frontier(es, lambda n: n if isinstance(n, int) else 0,
                                            lambda e: e[0], "Expand", constructor)
            reached, more = step.branch(lambda x: isinstance(x, int))
            more.connect_loop(handle)
            return reached.map(lambda x: x[1]).leave()

        return scope.iterative(loop)

    out = collect(build, threads=threads)
    assert sorted(x for _, x in out) == sorted(expected)


def test_nested_loops_two_levels():
    """Outer loop runs 3 rounds; in each, an inner loop counts a value down to 0.
    Times seen inside are Product(Product(0, outer_round), inner_round)."""
    seen = []

    def build(scope):
        def outer(mid):
            ohandle, ocycle = mid.feedback(1)
            start = scope.to_stream([2]).enter(mid).concat(ocycle)

            def inner(deep):
                ihandle, icycle = deep.feedback(1)
                x = start.enter(deep).concat(icycle)
                x.inspect_time(lambda t, v: seen.append((t, v)))
                zero, positive = x.branch(lambda v: v > 0)
                positive.map(lambda v: v - 1).connect_loop(ihandle)
                return zero.leave()

            finished = mid.iterative(inner)
            again, out = finished.branch_when(lambda t: t.inner >= 2)
            again.map(lambda v: 2).connect_loop(ohandle)
            return out.leave()

        return scope.iterative(outer)

    out = collect(build)
    assert out == [(0, 0)]
    expected = [(Product(Product(0, r), i), 2 - i) for r in range(3) for i in range(3)]
    assert sorted(seen, key=lambda p: (p[0].outer.inner, p[0].inner)) == expected


def test_parent_sees_only_the_projection_of_the_loop():
    """While a loop circulates a record for many rounds, the outer probe's frontier --
    sampled from inside the loop at every round -- stays at outer time 0 (an int:
    inner rounds are invisible outside), and empties once the loop is done."""
    seen = []

    def work(worker):
        probe = ts.ProbeHandle()

        def build(scope):
            def loop(inner):
                handle, cycle = inner.feedback(1)
                x = (scope.to_stream([0]).enter(inner).concat(cycle)
                     .inspect_time(lambda t, v: seen.append((t, probe.frontier.elements()))))
                x.filter(lambda v: v < 50).map(lambda v: v + 1).connect_loop(handle)
                return x.filter(lambda v: v == 50).leave()

            scope.iterative(loop).probe_with(probe)

        worker.dataflow(build)
        worker.step_while(lambda: not probe.done(), timeout=10)
        return probe.frontier.elements()

    assert ts.execute(work, timeout=30) == [[]]
    assert [t for t, _ in seen] == [Product(0, r) for r in range(51)]   # 51 rounds ran
    assert all(frontier == [0] for _, frontier in seen)


@pytest.mark.timeout(60)
def test_a_step_returns_while_a_loop_circulates_a_record_forever():
    """A scope's run passes over its children while they activate one another (a loop's
    rounds) for a bounded while only: each step returns, with rounds done, though the
    loop never ends."""
    rounds = []

    def work(worker):
        def build(scope):
            def loop(inner):
                handle, cycle = inner.feedback(1)
                x = scope.to_stream(["x"]).enter(inner).concat(cycle).inspect_time(lambda t, v: rounds.append(t))
                x.connect_loop(handle)                   # no exit: it circulates forever
                return x.filter(lambda v: False).leave()

            return scope.iterative(loop).probe()

        index = worker.next_dataflow_index()
        probe = worker.dataflow(build)
        seen = []
        for _ in range(3):
            assert worker.step()                         # incomplete, and it returned
            seen.append(len(rounds))
        worker.drop_dataflow(index)
        return seen, probe.done()

    (seen, done), = ts.execute(work, timeout=30)
    assert not done and 0 < seen[0] < seen[1] < seen[2]
    assert rounds == [Product(0, r) for r in range(len(rounds))]


def test_bounded_feedback_summary_ends_a_loop():
    from timely_spark.progress import Add, ProductSummary

    def build(scope):
        def loop(inner):
            handle, cycle = inner.feedback(ProductSummary(Add(0), Add(1, limit=4)))
            x = scope.to_stream(["x"]).enter(inner).concat(cycle)
            x.connect_loop(handle)            # no exit condition: the summary bounds it
            return x.map(lambda v: v).leave()

        return scope.iterative(loop)

    assert collect(build) == [(0, "x")] * 5   # rounds 0..4


def test_streaming_loop_at_top_level():
    """A feedback edge in the top scope carries records to later epochs."""
    def build(scope):
        handle, cycle = scope.feedback(1)
        x = scope.to_stream([3]).concat(cycle)
        x.filter(lambda v: v > 0).map(lambda v: v - 1).connect_loop(handle)
        return x

    assert collect(build) == [(0, 3), (1, 2), (2, 1), (3, 0)]


def test_a_loop_whose_inner_loop_feeds_its_output_directly():
    """Regression: the inner scope's output is the outer scope's output (leave twice)."""
    def build(scope):
        def outer(mid):
            def inner(deep):
                handle, cycle = deep.feedback(1)
                x = scope.to_stream([2]).enter(mid).enter(deep).concat(cycle)
                x.filter(lambda v: v > 0).map(lambda v: v - 1).connect_loop(handle)
                return x.leave()

            return mid.iterative(inner).leave()

        return scope.iterative(outer)

    assert collect(build) == [(0, 0), (0, 1), (0, 2)]
