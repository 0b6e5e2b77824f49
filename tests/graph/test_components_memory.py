"""The bounded-memory paths of the batch form of connected components: a worker's forest
folded from its batches into a union-find table (never concatenated), sent a window of
ids at a time already split by owner, contracted over the exchanged batches, the result
placed by rank -- each checked exact against union-find, dense ids (the table paths)
and sparse ones (the fallbacks), with chunks, windows and slices small enough that every
step runs in many pieces."""

import numpy as np
import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.dataflow import destinations
from timely_spark.errors import GraphInputError, WorkerError
from timely_spark.graph import connected_components, contraction, snapshot_components, spanning_forest, union_find
from timely_spark.graph.contraction import by_owner, hook_pairs
from timely_spark.graph.spanning_forest import forest_of_batches, forest_windows

from .graphs import awkward_graph


def dense(table: pa.Table) -> pa.Table:
    """The awkward graph with its ids made dense (0..n-1, order kept)."""
    ids, inverse = np.unique(np.concatenate([table["src"].to_numpy(), table["dst"].to_numpy()]),
                             return_inverse=True)
    m = table.num_rows
    return pa.table({"src": inverse[:m].astype(np.int64), "dst": inverse[m:].astype(np.int64)})


def in_pieces(a: np.ndarray, b: np.ndarray, rng) -> list:
    cuts = sorted(rng.integers(0, len(a) + 1, 4).tolist())
    return [(a[i:j], b[i:j]) for i, j in zip([0] + cuts, cuts + [len(a)])]


@pytest.fixture
def small_pieces(monkeypatch):
    monkeypatch.setattr(spanning_forest, "CHUNK", 7)
    monkeypatch.setattr(spanning_forest, "WINDOW", 50)
    monkeypatch.setattr(contraction, "EXCHANGE_ROWS", 13)
    monkeypatch.setattr(contraction, "CHUNK", 11)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("ids", ["dense", "sparse", "dense far from zero"])
def test_forest_of_batches_and_its_windows_match_union_find(seed, ids, small_pieces):
    rng = np.random.default_rng(seed)
    table = awkward_graph(seed) if ids == "sparse" else dense(awkward_graph(seed))
    a, b = table["src"].to_numpy(), table["dst"].to_numpy()
    if ids == "dense far from zero":
        a, b = a + 2**62, b + 2**62
    want = union_find(zip(a.tolist(), b.tolist()))
    v, c = forest_of_batches(in_pieces(a, b, rng))
    assert v.dtype == c.dtype == np.int64
    assert dict(zip(v.tolist(), c.tolist())) == want and v.tolist() == sorted(want)
    pieces = list(forest_windows(in_pieces(a, b, rng)))
    assert len(pieces) > 1
    assert [x for p, _ in pieces for x in p.tolist()] == sorted(want)
    assert dict(zip(np.concatenate([p for p, _ in pieces]).tolist(),
                    np.concatenate([q for _, q in pieces]).tolist())) == want


def test_forest_of_batches_hub_last_in_one_chunk():
    """A star whose hub has the largest id, all its edges in one chunk: each round hooks
    the hub's root to its smallest neighbour, so it settles in a few rounds."""
    k = 20_000
    v, c = forest_of_batches([(np.full(k, k, np.int64), np.arange(k, dtype=np.int64))])
    assert v.tolist() == list(range(k + 1)) and not c.any()


def hook_reference(u: np.ndarray, r: np.ndarray) -> tuple:
    smallest: dict = {}
    for x, y in zip(u.tolist(), r.tolist()):
        smallest[x] = min(smallest.get(x, y), y)
    links = [(y, smallest[x]) for x, y in zip(u.tolist(), r.tolist()) if y != smallest[x]]
    return dict(sorted(smallest.items())), union_find(links)


@pytest.mark.parametrize("seed", range(6))
def test_hook_pairs_over_batches_matches_a_reference(seed):
    rng = np.random.default_rng(seed)
    n, m = 60, 200
    base = [0, 2**40, -2**62][seed % 3]
    scale = 10**6 if seed >= 3 else 1                       # sparse ids: the sorting fallback
    u = rng.integers(0, n, m) * scale + base
    r = np.minimum(u, rng.integers(0, n, m) * scale + base)
    if seed == 2:
        r[0] = -2**63                                        # roots wider than int32 offsets
    pointers, links = hook_reference(u, r)
    vertices, smallest, nxt, roots = hook_pairs(in_pieces(u, r, rng))
    assert dict(zip(vertices.tolist(), smallest.tolist())) == pointers and vertices.tolist() == sorted(pointers)
    assert dict(zip(nxt.tolist(), roots.tolist())) == links


@pytest.mark.parametrize("peers", [2, 3, 4])
def test_local_forest_leaves_in_batches_each_for_one_owner(peers):
    """Each batch goes to one worker, by the hash the exchange routes by: the exchange
    then passes it on whole instead of hashing, sorting and copying the forest."""
    vertex = np.arange(1000, dtype=np.int64) * 7 - 300
    root = vertex // 3
    batches = by_owner(vertex, root, peers)
    owners = [set(destinations(rb, ["vertex"], peers).tolist()) for rb in batches]
    assert all(len(o) == 1 for o in owners) and len({min(o) for o in owners}) == len(batches)
    got = pa.Table.from_batches(batches).sort_by("vertex")
    assert got["vertex"].to_pylist() == vertex.tolist() and got["root"].to_pylist() == root.tolist()


@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize("ids", ["dense", "sparse"])
def test_batch_form_in_small_pieces_is_exact(workers, ids, small_pieces):
    table = awkward_graph(7) if ids == "sparse" else dense(awkward_graph(7))
    result = connected_components(table, workers=workers, timeout=60)
    want = union_find(zip(table["src"].to_pylist(), table["dst"].to_pylist()))
    assert result["vertex"].to_pylist() == sorted(want)
    assert dict(zip(result["vertex"].to_pylist(), result["component"].to_pylist())) == want


def test_batch_form_with_dense_ids_on_two_processes_of_two_threads():
    table = dense(awkward_graph(8))
    result = connected_components(table, workers=2, processes=2, timeout=60)
    want = union_find(zip(table["src"].to_pylist(), table["dst"].to_pylist()))
    assert dict(zip(result["vertex"].to_pylist(), result["component"].to_pylist())) == want


@pytest.mark.parametrize("threads", [1, 2])
def test_one_time_form_refuses_edges_at_a_second_time(threads):
    """``once=True`` keeps no forest after sending it, so edges at a later time would be
    contracted without the earlier ones: it says so instead of answering wrong.  On two
    workers time 0's edges go to worker 0 and time 1's to worker 1, which sent no forest
    at time 0 but must refuse all the same (it answered time 1 without time 0's edges)."""
    def work(w):
        def build(s):
            inp, edges = s.new_input()
            snapshot_components(edges, once=True).probe()
            return inp

        inp = w.dataflow(build)
        if w.index == 0:
            inp.send_batch(pa.record_batch({"src": [1], "dst": [2]}))
        inp.advance_to(1)
        if w.index == w.peers - 1:
            inp.send_batch(pa.record_batch({"src": [2], "dst": [3]}))
        inp.close()
        while w.step():
            pass

    with pytest.raises(WorkerError) as info:
        ts.execute(work, threads=threads, timeout=30)
    assert isinstance(info.value.cause, GraphInputError) and info.value.cause.what == "once"
    assert "second time (1)" in str(info.value.cause)


@pytest.mark.timeout(60)
def test_forest_of_batches_of_a_path_with_consecutive_ids_in_one_chunk():
    """A path 0-1-2-...-n in one chunk hooks every root onto its neighbour in one round:
    a chain of n pointers.  Finding the roots halves the paths it walks (pointer
    jumping, O(log n) passes); walking the chain a step a pass was O(n^2) -- minutes
    here (10 s for 32,000 edges)."""
    n = spanning_forest.CHUNK
    a = np.arange(n, dtype=np.int64)
    for pair in ((a, a + 1), (a + 1, a)):
        v, c = forest_of_batches([pair])
        assert v.tolist() == list(range(n + 1)) and not c.any()

