"""iterate over changelogs: reachability (join + distinct), connected components by
min-label propagation (reduce(min)) and a reachability through semi and anti joins, on
random graph changelogs over 22 outer epochs (inserts, deletes, duplicates, self-loops,
cycles, a long path cut and mended), against a naive fixpoint in plain Python at every
outer time; on 1 and 2 threads and 2 processes."""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import timely_spark as ts
from timely_spark.progress import Product

from .test_changelog import run

EPOCHS = 22
EMPTY, QUIET, CUT, MEND = 3, 7, 8, 12
NODES = 24
EDGE = pa.schema([("src", pa.int64()), ("dst", pa.int64()), ("diff", pa.int64())])
NODE = pa.schema([("node", pa.int64()), ("diff", pa.int64())])
LABEL = pa.schema([("node", pa.int64()), ("label", pa.int64())])


def edge_log(seed: int) -> list:
    rng = np.random.default_rng(seed)
    live: list = []
    log = []
    for epoch in range(EPOCHS):
        changes: list = []
        if epoch == 0:
            changes = [(i, i + 1, 1) for i in range(12)] + [(13, 14, 1), (14, 15, 1), (15, 13, 1)]
            changes += [(int(rng.integers(NODES)), int(rng.integers(NODES)), 1) for _ in range(6)]
        elif epoch == QUIET:
            changes = [(16, 17, 1), (16, 17, -1)]
        elif epoch == CUT:
            changes = [(6, 7, -1)]
        elif epoch == MEND:
            changes = [(6, 7, 1), (2, 3, 1)]                      # and a duplicate of a path edge
        elif epoch != EMPTY:
            for _ in range(int(rng.integers(1, 5))):
                if live and rng.random() < 0.4:
                    e = live[int(rng.integers(len(live)))]
                    if e[:2] not in [(i, i + 1) for i in range(12)]:
                        changes.append((*e[:2], -1))
                        continue
                changes.append((int(rng.integers(NODES)), int(rng.integers(NODES)), 1))
        for c in changes:
            if c[2] > 0:
                live.append(c)
            else:
                live.remove((c[0], c[1], 1))
        log.append(pa.Table.from_pylist([dict(zip(EDGE.names, c)) for c in changes], schema=EDGE))
    return log


def node_log(changes: dict) -> list:
    return [pa.Table.from_pylist([{"node": n, "diff": d} for n, d in changes.get(e, [])], schema=NODE)
            for e in range(EPOCHS)]


ROOTS = node_log({0: [(0, 1), (13, 1)], 5: [(20, 1)], 15: [(13, -1)]})
ALLOWED = node_log({0: [(n, 1) for n in range(NODES) if n != 9], 10: [(9, 1)], 17: [(3, -1)]})
BLOCKED = node_log({0: [(11, 1)], 9: [(11, -1)], 13: [(2, 1)]})


def smallest(rows: pa.Table, keys: list) -> pa.Table:
    return rows.group_by(keys).aggregate([("label", "min")]).rename_columns(["node", "label"])


def build(scope, edges, roots, allowed, blocked):
    links = edges.select(node="src", dst="dst", diff="diff")
    rounds: list = []                      # the loop's rounds, as a stream of (outer, round) rows

    def reach_body(nodes, inner):
        rounds.append(nodes.per_time(lambda t, batches: [pa.record_batch({"round": [t[1]]})]).leave())
        step = nodes.join(links.enter(inner), "node", running=True).select(node="dst", diff="diff")
        return step.concat(roots.enter(inner)).distinct()

    def filtered_body(nodes, inner):
        step = nodes.join(links.enter(inner), "node", running=True).select(node="dst", diff="diff")
        kept = step.concat(roots.enter(inner)).join(allowed.enter(inner), "node", join_type="semi", running=True)
        return kept.join(blocked.enter(inner), "node", join_type="anti", running=True).distinct()

    both = links.concat(edges.select(node="dst", dst="src", diff="diff"))
    labels = both.select(node="node", label="node", diff="diff").distinct()

    def components_body(current, inner):
        offers = current.join(both.enter(inner), "node", running=True).select(node="dst", label="label", diff="diff")
        return offers.concat(labels.enter(inner)).group_by("node").reduce(smallest, LABEL)

    return {"reach": roots.iterate(reach_body), "filtered": roots.iterate(filtered_body),
            "components": labels.iterate(components_body), "rounds": rounds[0]}


def counts(log: list, t: int, columns: list) -> dict:
    held: dict = {}
    for table in log[:t + 1]:
        for row in table.to_pylist():
            key = tuple(row[c] for c in columns)
            held[key] = held.get(key, 0) + row["diff"]
    return {k: n for k, n in held.items() if n > 0}


def reachable(edges: set, roots: set, allowed=None, blocked=frozenset()) -> set:
    def ok(n):
        return (allowed is None or n in allowed) and n not in blocked

    seen = {r for r in roots if ok(r)}
    frontier = list(seen)
    while frontier:
        n = frontier.pop()
        for s, d in edges:
            if s == n and d not in seen and ok(d):
                seen.add(d)
                frontier.append(d)
    return seen


def components(edges: set) -> dict:
    label = {n: n for e in edges for n in e}
    changed = True
    while changed:
        changed = False
        for s, d in edges:
            low = min(label[s], label[d])
            if label[s] != low or label[d] != low:
                label[s] = label[d] = low
                changed = True
    return label


def folded(times: dict, t: int) -> dict:
    held: dict = {}
    for when, table in times.items():
        if when <= t:
            for row in table.to_pylist():
                diff = row.pop("diff")
                key = tuple(row.values())
                held[key] = held.get(key, 0) + diff
    assert all(n >= 0 for n in held.values()), f"a negative count at {t}: {held}"
    return {k: n for k, n in held.items() if n}


@pytest.mark.parametrize("layout", [dict(threads=1), dict(threads=2), dict(processes=2)],
                         ids=["1 thread", "2 threads", "2 processes"])
@pytest.mark.slow
def test_fixpoints_of_random_changelogs_equal_a_naive_fixpoint_at_every_outer_time(layout):
    log = edge_log(3)
    got = run(build, [log, ROOTS, ALLOWED, BLOCKED], timeout=120, **layout)
    for name in ("reach", "filtered", "components"):
        times = got.get(name, {})
        assert EMPTY not in times and QUIET not in times, f"{name}: an epoch that changes nothing emitted"
        for t in range(EPOCHS):
            edges = set(counts(log, t, ["src", "dst"]))
            roots = set(k[0] for k in counts(ROOTS, t, ["node"]))
            if name == "reach":
                want = {(n,): 1 for n in reachable(edges, roots)}
            elif name == "filtered":
                allowed = set(k[0] for k in counts(ALLOWED, t, ["node"]))
                blocked = set(k[0] for k in counts(BLOCKED, t, ["node"]))
                want = {(n,): 1 for n in reachable(edges, roots, allowed, blocked)}
            else:
                want = {(n, lab): 1 for n, lab in components(edges).items()}
            assert folded(times, t) == want, f"{name} at outer time {t}"
    rounds = {t: max(table["round"].to_pylist()) for t, table in got["rounds"].items()}
    assert EMPTY not in rounds and QUIET not in rounds, "a loop ran rounds for an epoch that changed nothing"
    assert rounds[CUT] > 3, "cutting the path re-derived it round by round"


def test_iterate_inside_iterate_is_refused():
    with pytest.raises(ts.WorkerError, match="operator 'Iterate': iterate inside iterate is not supported"):
        ts.example(lambda s: s.iterative(lambda inner: s.to_stream(pa.table({"node": [1]})).enter(inner)
                                         .iterate(lambda x, scope: x).leave()))


def test_rounds_stop_when_a_round_changes_nothing():
    def work(worker):
        rounds: list = []

        def dataflow(scope):
            inp, nodes = scope.new_input()
            nodes.iterate(lambda x, inner: x.inspect_time(lambda t, b: rounds.append(t))
                          .with_columns(node=pc.min_element_wise(pc.field("node") + 1, 5)).distinct())
            return inp

        inp = worker.dataflow(dataflow)
        inp.send_batch(pa.table({"node": [0], "diff": [1]}))
        inp.close()
        while worker.step():
            pass
        return rounds

    rounds = ts.execute(work, timeout=30)[0]
    assert max(r[1] for r in rounds) <= 7 and Product(0, 5) in rounds, rounds


@pytest.mark.slow
def test_a_running_aggregate_inside_iterate_equals_a_naive_fixpoint_at_every_outer_time():
    """Min-label propagation with the running aggregate (min, and a count of the offers)
    in the loop body: the labels equal the naive components at every outer time."""
    log = edge_log(5)

    def build_aggregate(scope, edges):
        both = edges.select(node="src", dst="dst", diff="diff").concat(
            edges.select(node="dst", dst="src", diff="diff"))
        labels = both.select(node="node", label="node", diff="diff").distinct()

        def body(current, inner):
            offers = current.join(both.enter(inner), "node", running=True).select(
                node="dst", label="label", diff="diff")
            best = offers.concat(labels.enter(inner)).group_by("node").aggregate(
                [("label", "min"), ("label", "count")], running=True)
            return best.select(node="node", label="label_min", diff="diff")
        return {"components": labels.iterate(body)}

    got = run(build_aggregate, [log], timeout=120, threads=2)["components"]
    assert EMPTY not in got and QUIET not in got, "an epoch that changes nothing emitted"
    for t in range(EPOCHS):
        want = {(n, lab): 1 for n, lab in components(set(counts(log, t, ["src", "dst"]))).items()}
        assert folded(got, t) == want, f"outer time {t}"
