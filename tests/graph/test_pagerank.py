import importlib

import numpy as np
import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.graph import GraphInputError, pagerank, pagerank_reference
from timely_spark.graph.pagerank import power_iteration

from .graphs import awkward_graph


def check(result: pa.Table, table: pa.Table, iterations: int = 20) -> None:
    ref = pagerank_reference(table["src"].to_numpy(), table["dst"].to_numpy(), iterations)
    got = dict(zip(result["vertex"].to_pylist(), result["rank"].to_pylist()))
    assert sorted(got) == sorted(ref)
    assert max(abs(got[v] - ref[v]) for v in ref) < 1e-9
    assert abs(sum(got.values()) - 1) < 1e-9


@pytest.mark.parametrize("layout", [dict(workers=1), dict(workers=2), dict(workers=1, processes=2), dict(workers=4),
                                    dict(workers=2, processes=2)])
def test_pagerank_matches_numpy_definition(layout):
    table = awkward_graph(5)
    check(pagerank(table, timeout=60, **layout), table)


def test_dangling_mass_is_redistributed():
    table = pa.table({"src": [1, 1, 2], "dst": [2, 3, 3]})       # 3 has no out-edge
    check(pagerank(table, iterations=7, workers=2, timeout=30), table, 7)


def test_tolerance_stops_early_with_converged_ranks():
    table = awkward_graph(6)
    loose = pagerank(table, iterations=500, tolerance=1e-12, timeout=60)
    ref = pagerank_reference(table["src"].to_numpy(), table["dst"].to_numpy(), 500)
    got = dict(zip(loose["vertex"].to_pylist(), loose["rank"].to_pylist()))
    assert max(abs(got[v] - ref[v]) for v in ref) < 1e-10


def test_empty_and_bad_input():
    empty = pa.table({"src": pa.array([], pa.int64()), "dst": pa.array([], pa.int64())})
    assert pagerank(empty, workers=2, timeout=30).num_rows == 0
    with pytest.raises(GraphInputError, match="'dst'"):
        pagerank(pa.table({"src": [1]}), timeout=30)
    with pytest.raises(ts.ParameterError, match="iterations must be a whole number >= 1, got 0"):
        pagerank(empty, iterations=0)


def test_stream_form_over_epochs_is_cumulative():
    table = awkward_graph(7)
    cuts = [0, 500, table.num_rows]

    def work(w):
        seen = []

        def build(s):
            inp, edges = s.new_input()
            power_iteration(edges, iterations=10).inspect_time(lambda t, rb: seen.append((t, rb)))
            return inp

        inp = w.dataflow(build)
        for epoch in range(2):
            part = table.slice(cuts[epoch], cuts[epoch + 1] - cuts[epoch])
            if w.index == epoch:                  # each epoch's edges come in on one worker only
                inp.send_batch(part)
            inp.advance_to(epoch + 1)
        inp.close()
        while w.step():
            pass
        return seen

    per_time: dict = {}
    for part in ts.execute(work, threads=2, timeout=60):
        for t, rb in part:
            per_time.setdefault(t, []).append(rb)
    assert sorted(per_time) == [0, 1]
    for epoch in range(2):
        check(pa.Table.from_batches(per_time[epoch]), table.slice(0, cuts[epoch + 1]), 10)
    assert np.isclose(sum(sum(rb["rank"].to_pylist()) for rb in per_time[1]), 1)


@pytest.mark.parametrize("workers", [1, 2])
def test_ids_far_apart_take_the_ranked_key_path(workers):
    """Ids spread over the whole int64 range (negative too) do not fit the packed sort
    keys of the workers' index: they are ranked first, and the result is the same."""
    table = awkward_graph(8)
    wide = pa.table({name: pa.array((table[name].to_numpy() - 15_000) * 2**47) for name in ("src", "dst")})
    assert wide["src"].to_numpy().min() < -2**60 < 2**60 < wide["dst"].to_numpy().max()
    check(pagerank(wide, workers=workers, timeout=60), wide)


def test_ids_next_to_the_int64_limits():
    """Ids close together but near 2**63 - 1 (and -2**63): the packed keys are offsets,
    and building them wraps around int64 on the way without changing the result."""
    table = awkward_graph(10)
    for shift in (2**63 - 1 - 40_000, -(2**63)):
        near = pa.table({name: pa.array(table[name].to_numpy() + shift) for name in ("src", "dst")})
        check(pagerank(near, workers=2, timeout=60), near)


@pytest.mark.parametrize("workers", [1, 2])
def test_edges_in_many_destination_blocks(workers, monkeypatch):
    """Blocks of 4 destinations (not 2**17): the round's order by block, source,
    destination spans many blocks, and the ranks are the same."""
    monkeypatch.setattr(importlib.import_module("timely_spark.graph.pagerank"), "BLOCK_BITS", 2)
    table = awkward_graph(9)
    check(pagerank(table, workers=workers, timeout=60), table)
