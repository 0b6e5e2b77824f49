"""Vertex ids of any type in the incremental stream forms (components, pagerank_stream,
shortest_paths_stream): strings, binaries, uint64 and dates, mapped from random int64
changelogs by an order-keeping map, give the int64 output mapped back -- at every time,
components labelled by the smallest id in the type's own order; the id dictionaries cut
and restored into another worker count."""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import timely_spark as ts
from timely_spark.dataflow.operators import arrangement
from timely_spark.errors import GraphInputError, WorkerError

from ..state.opstate_harness import cut_and_restore
from .changelogs import feed, fold_upto, random_changelog, run_epochs

KINDS = {
    "string": lambda a: pc.binary_join_element_wise("v", pc.utf8_lpad(a.cast(pa.string()), 5, "0"), ""),
    "binary": lambda a: pc.utf8_lpad(a.cast(pa.string()), 5, "0").cast(pa.binary()),
    "uint64": lambda a: pc.add(a.cast(pa.uint64()), pa.scalar(2**63, pa.uint64())),
    "date": lambda a: a.cast(pa.int32()).cast(pa.date32()),
}


def mapped(table: pa.Table, kind: str, columns: list) -> pa.Table:
    for c in columns:
        table = table.set_column(table.schema.get_field_index(c), c, KINDS[kind](table[c].combine_chunks()))
    return table


def rows(table: pa.Table) -> list:
    return sorted(map(str, table.to_pylist()))


def check_equal(build, kind, columns, epochs, threads=2):
    ints = run_epochs(epochs, build, threads=threads)
    other = run_epochs([mapped(t, kind, ["src", "dst"]) for t in epochs], build, threads=threads)
    assert ints and sorted(ints) == sorted(other)
    for t in ints:
        assert rows(other[t]) == rows(mapped(ints[t], kind, columns)), f"{kind} ids at time {t}"


@pytest.mark.parametrize("kind", list(KINDS))
def test_components_of_any_ids_are_the_int64_output_mapped_back(kind):
    check_equal(ts.graph.components, kind, ["vertex", "component"], random_changelog(3))


@pytest.mark.parametrize("kind", ["string", "binary", "uint64"])
def test_shortest_paths_stream_of_any_ids(kind):
    sources = pa.array([0, 100, 200], pa.int64())

    def build_for(ids):
        return lambda edges: ts.graph.shortest_paths_stream(edges, ids)
    epochs = random_changelog(4)
    ints = run_epochs(epochs, build_for(sources), threads=2)
    other = run_epochs([mapped(t, kind, ["src", "dst"]) for t in epochs], build_for(KINDS[kind](sources)),
                       threads=2)
    assert ints and sorted(ints) == sorted(other)
    for t in ints:
        assert rows(other[t]) == rows(mapped(ints[t], kind, ["vertex", "source"])), f"{kind} ids at time {t}"


@pytest.mark.parametrize("kind", ["string", "binary", "uint64"])
@pytest.mark.slow
def test_pagerank_stream_of_any_ids(kind):
    epochs = random_changelog(5)

    def build(edges):
        return ts.graph.pagerank_stream(edges, tolerance=1e-12)
    ints = run_epochs(epochs, build, threads=2)
    other = run_epochs([mapped(t, kind, ["src", "dst"]) for t in epochs], build, threads=2)
    for t in ints:
        want = fold_upto({s: mapped(x, kind, ["vertex"]) for s, x in ints.items()}, t, ["vertex"])
        got = fold_upto(other, t, ["vertex"])
        assert sorted(got) == sorted(want), f"{kind} ids at time {t}"
        assert np.allclose([got[v][0] for v in sorted(got)], [want[v][0] for v in sorted(want)], atol=1e-8)


def test_components_of_strings_on_two_processes():
    epochs = random_changelog(6, epochs=8)
    ints = run_epochs(epochs, ts.graph.components, threads=1, processes=2)
    other = run_epochs([mapped(t, "string", ["src", "dst"]) for t in epochs], ts.graph.components,
                       threads=1, processes=2)
    for t in ints:
        assert rows(other[t]) == rows(mapped(ints[t], "string", ["vertex", "component"]))


@pytest.mark.parametrize("before, after", [(2, 3), (3, 2)])
def test_string_id_dictionaries_are_cut_and_restored_into_another_worker_count(before, after):
    epochs = [mapped(t, "string", ["src", "dst"]).to_batches() for t in random_changelog(7, epochs=8)]
    for build in (lambda s, x: ts.graph.components(x),
                  lambda s, x: ts.graph.shortest_paths_stream(x, ["v00000", "v00100"])):
        whole, got = cut_and_restore(build, epochs, cut=4, before=before, after=after)
        assert whole
        assert got == whole


def test_ids_of_two_types_are_named():
    def build(scope):
        inp, edges = scope.new_input()
        ts.graph.components(edges)
        inp.send(pa.record_batch({"src": ["a"], "dst": ["b"]}))
        inp.advance_to(1)
        inp.send(pa.record_batch({"src": [1], "dst": [2]}))
        inp.close()
    with pytest.raises(WorkerError) as info:
        ts.example(build)
    assert isinstance(info.value.cause, GraphInputError)
    assert "changed type from string to int64" in str(info.value.cause)


def churn(epochs: int = 40, live: int = 50) -> list:
    """Int64 edge changes where every epoch adds ``live`` edges between new vertices and
    withdraws the edges of the epoch before: ids come and go, ``2 * live`` in use at a time."""
    out = []
    for e in range(epochs):
        base = 10_000 * (e + 1)
        src = np.arange(base, base + live)
        add = pa.table({"src": src, "dst": src + 5_000, "diff": np.ones(live, np.int64)})
        if e:
            old = out[-1].filter(pc.greater(out[-1]["diff"], 0))
            add = pa.concat_tables([add, old.set_column(2, "diff", pa.array(np.full(old.num_rows, -1)))])
        out.append(add)
    return out


def dictionary_rows(epochs: list, threads: int = 2) -> tuple[dict, int]:
    """The components output of ``epochs`` and the most rows the id dictionary held (all workers)."""
    from timely_spark.graph.state_log import GRAPH_LOG

    def work(worker):
        events, seen = [], []
        worker.log_register().insert(GRAPH_LOG, events.extend)

        def dataflow(scope):
            inp, edges = scope.new_input()
            ts.graph.components(edges).inspect_time(lambda t, rb: seen.append((t, rb)))
            return inp

        feed(worker, worker.dataflow(dataflow), epochs)
        worker.log_register().flush()
        return seen, [(e["frontier"], e["count"]) for e in events if e["name"] == "ComponentsIdDecode"]

    per_time: dict = {}
    rows: dict = {}
    for seen, sizes in ts.execute(work, threads=threads, timeout=120):
        for t, rb in seen:
            per_time.setdefault(t, []).append(rb)
        for t, n in sizes:
            rows[t] = rows.get(t, 0) + n
    return {t: pa.Table.from_batches(b) for t, b in per_time.items()}, max(rows.values(), default=0)


@pytest.mark.slow
def test_the_id_dictionary_drops_ids_that_left(monkeypatch):
    # Small levels pile up to SMALL_LEVEL x SMALL_LEVELS rows before they merge (and drop dead ids):
    # made small here, so that this short churn shows the dictionary following the live ids.
    monkeypatch.setattr(arrangement, "SMALL_LEVEL", 16)
    monkeypatch.setattr(arrangement, "SMALL_LEVELS", 2)
    epochs = churn()
    ints = run_epochs(epochs, ts.graph.components, threads=2)
    other, most = dictionary_rows([mapped(t, "string", ["src", "dst"]) for t in epochs])
    assert sorted(ints) == sorted(other)
    for t in ints:
        assert rows(other[t]) == rows(mapped(ints[t], "string", ["vertex", "component"])), f"time {t}"
    distinct = 2 * 50 * 40                  # every id ever seen
    live = 2 * 2 * 50                       # ids of two epochs' edges
    assert 0 < most <= 4 * live < distinct, most
