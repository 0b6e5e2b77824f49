"""Connected components contracted across workers (graph/contraction.py): exact on
graphs that stress the distribution, on 1, 2 and 4 workers (threads and processes),
and the state of every round split evenly by vertex hash; the stream form on 4
workers, its edge counts split by edge hash."""

import numpy as np
import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.graph import GRAPH_LOG, components, connected_components, snapshot_components, union_find

from .changelogs import collection, fold, fold_upto, random_changelog, run_epochs, send_share


def reference(table: pa.Table) -> dict:
    return union_find(zip(table["src"].to_pylist(), table["dst"].to_pylist()))


def giant(seed: int = 0) -> pa.Table:
    """One giant component of 3,000 vertices (a random graph of mean degree 6), rows shuffled:
    every worker's slice holds part of it."""
    rng = np.random.default_rng(seed)
    n = 3000
    src, dst = rng.integers(0, n, 3 * n), rng.integers(0, n, 3 * n)
    path = rng.permutation(n)                                        # and a path, so it is one component
    return pa.table({"src": np.concatenate([src, path[:-1]]), "dst": np.concatenate([dst, path[1:]])})


def long_path(seed: int = 0) -> pa.Table:
    """A path of 2,000 vertices whose consecutive edges go to different workers' slices
    (round-robin rows), ids shuffled so the smallest id is in the middle."""
    rng = np.random.default_rng(seed)
    ids = rng.permutation(np.arange(5000, 7000))
    src, dst = ids[:-1], ids[1:]
    order = np.argsort(np.arange(len(src)) % 7, kind="stable")      # rows i, i+7, ... together
    return pa.table({"src": src[order], "dst": dst[order]})


def star(seed: int = 0) -> pa.Table:
    """A star whose 1,500 edges all sit in the first worker's slice (the hub's id the
    largest), then many small random edges over the leaves."""
    rng = np.random.default_rng(seed)
    leaves = np.arange(1, 1501)
    extra = rng.integers(1, 1501, (300, 2))
    return pa.table({"src": np.concatenate([np.full(1500, 9999), extra[:, 0]]),
                     "dst": np.concatenate([leaves, extra[:, 1]])})


def tiny(seed: int = 0) -> pa.Table:
    """1,000 components of two or three vertices, and self-loops."""
    rng = np.random.default_rng(seed)
    base = rng.permutation(1000) * 10
    src = np.concatenate([base, base[:500] + 1, base[:50]])
    dst = np.concatenate([base + 1, base[:500] + 2, base[:50]])
    order = rng.permutation(len(src))
    return pa.table({"src": src[order], "dst": dst[order]})


GRAPHS = {"giant": giant, "long path": long_path, "star": star, "tiny": tiny}


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("layout", [dict(workers=1), dict(workers=2), dict(workers=4)], ids=["1", "2", "4"])
def test_exact_on_threads(name, layout):
    table = GRAPHS[name]()
    result = connected_components(table, **layout, timeout=60)
    got = dict(zip(result["vertex"].to_pylist(), result["component"].to_pylist()))
    assert got == reference(table)


def test_exact_on_two_processes_of_two_threads():
    table = pa.concat_tables([long_path(1), star(1), tiny(1)])
    result = connected_components(table, workers=2, processes=2, timeout=120)
    got = dict(zip(result["vertex"].to_pylist(), result["component"].to_pylist()))
    assert got == reference(table)


def state_rows(table: pa.Table, peers: int) -> list:
    """The ``state`` events of the GRAPH_LOG stream of a run of snapshot_components on
    ``peers`` threads, each worker fed an even slice of ``table``."""
    def work(worker):
        events: list = []
        worker.log_register().insert(GRAPH_LOG, events.extend)
        n = table.num_rows
        lo, hi = n * worker.index // peers, n * (worker.index + 1) // peers
        worker.dataflow(lambda s: snapshot_components(s.to_stream(table.slice(lo, hi - lo))))
        while worker.step():
            pass
        worker.log_register().flush()
        return events

    return [e for events in ts.execute(work, threads=peers, timeout=60) for e in events]


def test_every_round_holds_an_even_share_on_four_workers():
    rng = np.random.default_rng(5)
    n = 20_000
    table = pa.table({"src": rng.integers(0, n, 2 * n), "dst": rng.integers(0, n, 2 * n)})
    events = state_rows(table, 4)
    rows: dict = {}
    for e in events:
        assert e["event"] == "state"
        rows.setdefault((e["name"], e["frontier"]), [0] * 4)[e["worker"]] += e["count"]
    names = {name for name, _ in rows}
    assert {"LocalForest", "Contract", "Pointers", "Resolve"} <= names
    checked = 0
    for (name, time), per_worker in rows.items():
        mean = sum(per_worker) / 4
        if mean >= 100:                       # a round of a few rows cannot be split evenly by hashing
            checked += 1
            assert max(per_worker) <= 1.5 * mean, (name, time, per_worker)
    assert checked >= 4


@pytest.mark.parametrize("layout", [dict(threads=4), dict(threads=2, processes=2)], ids=["4 threads", "2x2"])
def test_stream_form_on_four_workers_folds_to_union_find(layout):
    epochs = random_changelog(seed=11, epochs=14, n=30)
    per_time = run_epochs(epochs, components, **layout)
    for t in range(len(epochs)):
        edges = collection(epochs, t, ["src", "dst"])
        want = union_find(zip(edges["src"].to_pylist(), edges["dst"].to_pylist()))
        got = {v: c for (v,), (c,) in fold_upto(per_time, t, ["vertex"]).items()}
        assert got == want, f"time {t}"


def test_stream_form_counts_edges_on_every_worker():
    rng = np.random.default_rng(2)
    load = pa.table({"src": rng.integers(0, 3000, 8000), "dst": rng.integers(0, 3000, 8000),
                     "diff": np.ones(8000, np.int64)})

    def work(worker):
        events: list = []
        worker.log_register().insert(GRAPH_LOG, events.extend)

        def build(s):
            inp, edges = s.new_input()
            components(edges)
            return inp

        inp = worker.dataflow(build)
        n = load.num_rows
        lo, hi = n * worker.index // 4, n * (worker.index + 1) // 4
        inp.send(load.slice(lo, hi - lo).to_batches()[0])
        inp.close()
        while worker.step():
            pass
        worker.log_register().flush()
        return [(e["worker"], e["count"]) for e in events if e["name"] == "ComponentsEdges"]

    rows = [0] * 4
    for w, count in (x for part in ts.execute(work, threads=4, timeout=60) for x in part):
        rows[w] += count
    assert min(rows) > 0 and max(rows) <= 1.5 * sum(rows) / 4, rows


@pytest.mark.parametrize("before, after", [(2, 3), (3, 2)])
def test_stream_form_restores_into_another_worker_count(tmp_path, before, after):
    """The sharded edge counts are keyed by edge hash: a snapshot taken on ``before``
    workers restores into ``after`` (withdrawals of edges sent before the snapshot are
    accepted, and the results fold to union-find of all the edges)."""
    epochs = random_changelog(seed=3, epochs=8, n=25)
    ckpt = str(tmp_path / "ckpt")

    def work(worker, part):
        seen: list = []

        def dataflow(scope):
            inp, edges = scope.new_input()
            components(edges).inspect(seen.append)
            return inp

        inp = worker.dataflow(dataflow)
        start = 0 if worker.restored_time is None else worker.restored_time
        inp.advance_to(start)
        for epoch in range(start, len(epochs) if part else 4):
            send_share(inp, worker, epochs[epoch])
            inp.advance_to(epoch + 1)
        inp.close()
        while worker.step():
            pass
        return worker.restored_time, seen

    first = ts.execute(lambda w: work(w, 0), threads=before, checkpoint=ckpt, timeout=60)
    second = ts.execute(lambda w: work(w, 1), threads=after, checkpoint=ckpt, timeout=60)
    assert [r for r, _ in second] == [4] * after
    out = pa.Table.from_batches([rb for run in (first, second) for _, seen in run for rb in seen])
    edges = collection(epochs, len(epochs) - 1, ["src", "dst"])
    want = union_find(zip(edges["src"].to_pylist(), edges["dst"].to_pylist()))
    assert {v: c for (v,), (c,) in fold(out, ["vertex"]).items()} == want


def snapshot_runs(sends, threads, checkpoint=None):
    """snapshot_components on ``threads`` workers; ``sends(worker)`` gives ``[(time, worker
    index, src, dst)]`` to send; returns ``{time: {vertex: component}}`` over all workers."""
    def work(worker):
        seen: list = []

        def dataflow(scope):
            inp, edges = scope.new_input()
            snapshot_components(edges).inspect_time(lambda t, rb: seen.append((t, rb.to_pylist())))
            return inp

        inp = worker.dataflow(dataflow)
        for t, w, src, dst in sends(worker):
            inp.advance_to(t)
            if w == worker.index:
                inp.send(pa.record_batch({"src": np.array(src, np.int64), "dst": np.array(dst, np.int64)}))
        inp.close()
        while worker.step():
            pass
        return seen

    out: dict = {}
    for part in ts.execute(work, threads=threads, checkpoint=checkpoint, timeout=60):
        for t, rows in part:
            for row in rows:
                assert out.setdefault(t, {}).setdefault(row["vertex"], row["component"]) == row["component"]
    return out


def test_snapshot_components_covers_earlier_times_on_a_worker_given_no_edges_now():
    """At each time the whole result over all edges so far, also where the worker
    holding the earlier edges gets none at this time."""
    out = snapshot_runs(lambda w: [(0, 1, [1], [2]), (1, 0, [3], [4]), (2, 0, [2], [3])], threads=2)
    assert out == {0: {1: 1, 2: 1}, 1: {1: 1, 2: 1, 3: 3, 4: 3}, 2: {1: 1, 2: 1, 3: 1, 4: 1}}


@pytest.mark.parametrize("before, after", [(2, 3), (3, 2)])
def test_snapshot_components_restores_into_another_worker_count(tmp_path, before, after):
    """Each worker's local forest is in the snapshot (keyed by vertex hash): a restored
    run's results cover the edges sent before the snapshot."""
    ckpt = str(tmp_path / "ckpt")
    first = snapshot_runs(lambda w: [(0, 0, [1, 5], [2, 6]), (0, 1, [3], [4])], before, ckpt)
    assert first == {0: {1: 1, 2: 1, 3: 3, 4: 3, 5: 5, 6: 5}}
    again = snapshot_runs(lambda w: [(w.restored_time, after - 1, [2], [3])], after, ckpt)
    assert again == {1: {1: 1, 2: 1, 3: 1, 4: 1, 5: 5, 6: 5}}


def test_edge_counts_are_exact_for_counts_beyond_float_precision():
    """2**53 + 1 copies, then 2**53 withdrawn: one copy is left, the edge stays."""
    from timely_spark.graph.incremental_components import EdgeCounts

    counts = EdgeCounts("Components")
    assert counts.update(0, np.array([1]), np.array([2]), np.array([2**53 + 1]))[2].tolist() == [True]
    assert counts.update(1, np.array([2, 1]), np.array([1, 2]), np.array([1, -2**53]))[0].tolist() == []
    assert counts.update(2, np.array([1, 2]), np.array([2, 1]), np.array([-1, -1]))[2].tolist() == [False]
