"""Every built-in stateful operator keeps its state: a run cut at a time and restored
gives exactly the output of an uninterrupted run."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.testing import collect

from .opstate_harness import cut_and_restore

WORDS = [[(w, 1) for w in "abcab"], [("a", 2), ("c", 1)], [], [("b", 5), ("d", 1)], [("a", 1)]]


def check(build, epochs, cut=3, before=2, after=2, **kw):
    whole, got = cut_and_restore(build, epochs, cut, before, after, **kw)
    assert whole, "the test must produce output"
    assert got == whole


@pytest.mark.parametrize("before, after", [(2, 2), (2, 3), (3, 2)])
def test_state_machine(before, after):
    def running(k, v, s):
        total = (s or 0) + v
        return total, [(k, total)]
    check(lambda s, x: x.state_machine(running), WORDS, before=before, after=after)


@pytest.mark.parametrize("after", [2, 3])
def test_aggregate(after):
    check(lambda s, x: x.aggregate(lambda k, v, a: (a or 0) + v, lambda k, a: (k, a)), WORDS, after=after)


def test_accumulate_and_count():
    check(lambda s, x: x.count(), WORDS)


@pytest.mark.parametrize("before, after", [(2, 2), (2, 3), (3, 2)])
def test_delay(before, after):
    check(lambda s, x: x.delay(lambda r, t: t + r[1]), WORDS, before=before, after=after)


@pytest.mark.parametrize("after", [1, 3])
def test_delay_total(after):
    check(lambda s, x: x.delay_total(lambda r, t: t + r[1]), WORDS, after=after)


def _log(rows):
    return [pa.record_batch({"k": [r[0] for r in rows], "v": [r[1] for r in rows], "diff": [r[2] for r in rows]})]


CHANGES = [_log([("a", 1, 1), ("b", 2, 1), ("c", 3, 1)]), _log([("a", 1, 1), ("d", 4, 1)]),
           _log([("a", 1, -1), ("b", 2, -1), ("e", 9, 1)]), _log([("a", 1, -1), ("c", 3, 1)]),
           _log([("d", 4, -1), ("b", 7, 1)])]


@pytest.mark.parametrize("before, after", [(2, 2), (2, 3), (3, 2)])
def test_distinct(before, after):
    check(lambda s, x: x.distinct(), CHANGES, cut=3, before=before, after=after)


@pytest.mark.parametrize("before, after", [(2, 2), (2, 3), (3, 2)])
def test_group_by_running(before, after):
    aggs = [("v", "sum"), ("v", "min"), ("v", "max"), ([], "count_all"), ("v", "mean")]
    check(lambda s, x: x.group_by("k").aggregate(aggs, running=True), CHANGES, cut=3, before=before, after=after)


@pytest.mark.parametrize("before, after", [(2, 2), (2, 3), (3, 2)])
def test_reduce_and_top_k(before, after):
    def spread(rows, keys):
        out = rows.group_by(keys).aggregate([("v", "max"), ("v", "min")])
        return out.select(["k", "v_max", "v_min"])
    schema = pa.schema([("k", pa.string()), ("v_max", pa.int64()), ("v_min", pa.int64())])
    check(lambda s, x: x.group_by("k").reduce(spread, schema), CHANGES, cut=3, before=before, after=after)
    check(lambda s, x: x.map(lambda b: b.set_column(0, "k", pa.array(["g"] * b.num_rows))).group_by("k")
          .top_k(2, [("v", "descending")]), CHANGES, cut=3, before=before, after=after)


@pytest.mark.parametrize("after", [2, 3])
@pytest.mark.parametrize("kind", ["inner", "outer", "anti"])
def test_join_running(after, kind):
    other = [_log([("a", 10, 1)]), _log([("b", 20, 1), ("a", 11, 1)]), [], _log([("a", 10, -1)]), _log([("c", 5, 1)])]
    epochs = [[left, right] for left, right in zip(CHANGES, other)]
    check(lambda s, x, y: x.join(y.map(lambda b: b.rename_columns(["k", "w", "diff"])), "k", join_type=kind,
                                 running=True), epochs, cut=3, after=after, inputs=2)


@pytest.mark.parametrize("after", [2, 3])
def test_a_join_and_a_reduce_sharing_one_arrangement(after):
    other = [_log([("a", 10, 1)]), _log([("b", 20, 1), ("a", 11, 1)]), [], _log([("a", 10, -1)]), _log([("c", 5, 1)])]
    epochs = [[left, right] for left, right in zip(CHANGES, other)]

    def count(rows, keys):
        return rows.group_by(keys).aggregate([("w", "sum")]).rename_columns(keys + ["w"])

    def build(s, x, y):
        arranged = y.map(lambda b: b.rename_columns(["k", "w", "diff"])).arrange("k")
        return x.join(arranged, "k", join_type="left", running=True).concat(arranged.reduce(count))
    check(build, epochs, cut=3, after=after, inputs=2)


def _events(epoch, n=4):
    """Rows of logical time ``epoch``: event times in [10*epoch, 10*epoch + 10)."""
    return [pa.record_batch({"t": [10 * epoch + (3 * i) % 10 for i in range(n)],
                             "k": ["a", "b", "a", "c"][:n], "v": [epoch * 10 + i for i in range(n)]})]


EVENTS = [_events(e) for e in range(7)]


@pytest.mark.parametrize("after", [2, 3])
@pytest.mark.parametrize("kind", [dict(every=20), dict(every=10, period=30), dict(gap=12)])
def test_windows(kind, after):
    aggs = [("v", "sum"), ([], "count_all")]
    check(lambda s, x: x.group_by_window("t", keys="k", epoch=10, **kind).aggregate(aggs), EVENTS, cut=3,
          after=after, lagging=True)


def test_windows_without_keys():
    check(lambda s, x: x.group_by_window("t", every=30, epoch=10).aggregate([("v", "sum")]), EVENTS, cut=4,
          after=3, lagging=True)


def _late_sums(s, x):
    """unary_notify: each time's sum, sent two times later (state kept through state=)."""
    sums: dict = {}

    def logic(input, output, notificator):
        for cap, batch in input:
            t = cap.time
            if t not in sums:
                sums[t] = 0
                notificator.notify_at(cap.delayed(t + 2))
            sums[t] += sum(v for _, v in batch)
        for cap in notificator:
            output.session(cap).give(("sum", cap.time, sums.pop(cap.time - 2, None)))

    kept = ts.dataflow.StateHooks(lambda t: {k: v for k, v in sums.items() if k < t}, sums.update)
    return x.unary_notify(None, "LateSums", [], logic, state=kept)


def test_unary_notify_pending_and_state():
    check(_late_sums, WORDS)


class _Reminder(ts.Vertex):
    """A vertex that counts records per time and reports three times later."""

    def __init__(self):
        self.counts = {}

    def on_recv(self, input, records, time):
        if time not in self.counts:
            self.counts[time] = 0
            self.notify_at(time + 3)
        self.counts[time] += len(records)

    def on_notify(self, time):
        self.send_by(self.output, [(time, self.counts.pop(time - 3, 0))], time)

    def checkpoint(self, time):
        return {t: n for t, n in self.counts.items() if t < time}

    def restore(self, state):
        self.counts.update(state)


def test_vertex_pending_and_checkpoint():
    check(lambda s, x: x.vertex(_Reminder()), WORDS)


def _edges(rows):
    return [pa.record_batch({"src": [r[0] for r in rows], "dst": [r[1] for r in rows],
                             "diff": [r[2] for r in rows]})]


EDGES = [_edges([(1, 2, 1), (2, 3, 1), (3, 1, 1), (4, 5, 1)]), _edges([(5, 6, 1), (2, 4, 1)]),
         _edges([(3, 1, -1), (6, 1, 1)]), _edges([(1, 7, 1), (4, 5, -1)]), _edges([(7, 2, 1), (2, 4, -1)])]


@pytest.mark.parametrize("after", [2, 3])
@pytest.mark.slow
def test_pagerank_stream(after):
    def build(s, x):
        ranks = ts.graph.pagerank_stream(x, tolerance=1e-12)
        return ranks.map(lambda b: b.set_column(1, "rank", pa.compute.round(b["rank"], 6)))
    check(build, EDGES, cut=3, after=after)


@pytest.mark.parametrize("after", [2, 3])
def test_shortest_paths_stream(after):
    check(lambda s, x: ts.graph.shortest_paths_stream(x, [1, 4]), EDGES, cut=3, after=after)


def _reach_and_labels(s, x):
    """Reachability from node 1 (join + distinct) and components (join + reduce(min)) through iterate."""
    links = x.select(node="src", dst="dst", diff="diff")
    roots = links.filter(pa.compute.field("node") == 1).select(node="node", diff="diff").distinct()

    def reach(nodes, inner):
        hop = nodes.join(links.enter(inner), "node", running=True).select(node="dst", diff="diff")
        return hop.concat(roots.enter(inner)).distinct()

    both = links.concat(x.select(node="dst", dst="src", diff="diff"))
    own = both.select(node="node", label="node", diff="diff").distinct()
    schema = pa.schema([("node", pa.int64()), ("label", pa.int64())])

    def smallest(rows, keys):
        return rows.group_by(keys).aggregate([("label", "min")]).rename_columns(["node", "label"])

    def labels(current, inner):
        offers = current.join(both.enter(inner), "node", running=True).select(node="dst", label="label", diff="diff")
        return offers.concat(own.enter(inner)).group_by("node").reduce(smallest, schema)

    return roots.iterate(reach).select(kind=pa.compute.scalar("reach"), node="node", label="node", diff="diff") \
        .concat(own.iterate(labels).select(kind=pa.compute.scalar("label"), node="node", label="label", diff="diff"))


@pytest.mark.parametrize("before, after", [(2, 3), (3, 2)])
def test_iterate(before, after):
    check(_reach_and_labels, EDGES, cut=3, before=before, after=after)


def _unprocessed(build, restore=None):
    """One worker: records at time 0 reach the operator, the input moves to 1, and the
    snapshot at 1 is taken before the operator has seen its frontier move (it still
    holds time 0: a stash the snapshot must keep).  Returns (saves, output)."""
    from .opstate_harness import Restorer

    def work(w):
        if restore is not None:
            w.attach_snapshots(Restorer(w, restore))
        out = []

        def dataflow(s):
            inp, x = s.new_input()
            build(s, x).inspect_time(lambda t, r: out.append((t, r)))
            return inp

        inp = w.dataflow(dataflow)
        if restore is None:
            inp.send_batch([("a", 1), ("b", 2), ("a", 3)])
            w.step()
            inp.advance_to(1)
            saves = {(k.dataflow, k.address): k.save(1) for k in w.kept_states()}
            return saves, list(out)
        inp.advance_to(1)
        inp.close()
        while w.step():
            pass
        return None, out

    return ts.execute(work)[0]


@pytest.mark.parametrize("build", [
    lambda s, x: x.aggregate(lambda k, v, a: (a or 0) + v, lambda k, a: (k, a)),
    lambda s, x: x.accumulate(0, lambda a, b: a + len(b)),
    lambda s, x: x.state_machine(lambda k, v, st: ((st or 0) + v, [(k, (st or 0) + v)])),
], ids=["aggregate", "accumulate", "state_machine"])
def test_held_times_before_the_snapshot(build):
    saves, before = _unprocessed(build)
    assert before == []                                  # time 0 is held, not yet emitted
    restore = {(0, *addr): pickle.loads(pickle.dumps(v)) for addr, v in saves.items()}
    _, after = _unprocessed(build, restore)
    expected = sorted(p for p in collect(lambda s: build(s, s.to_stream([("a", 1), ("b", 2), ("a", 3)]))))
    assert sorted(after) == expected


@pytest.mark.parametrize("after", [2])
def test_per_time_outer_join_keeps_the_schemas_it_saw(after):
    """A time with rows on the left only: a left join still gives the right's columns."""
    left = [pa.record_batch({"k": [1, 2], "a": ["x", "y"]})]
    right = [pa.record_batch({"k": [1], "b": [10]})]
    epochs = [[left, right], [left, []], [left, []], [left, []], [left, right]]
    check(lambda s, x, y: x.join(y, "k", join_type="left"), epochs, cut=3, after=after, inputs=2)
