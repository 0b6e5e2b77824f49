import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.graph import GraphInputError, dijkstra_reference, shortest_paths, shortest_paths_stream

from .graphs import awkward_graph


def as_dict(result: pa.Table) -> dict:
    return {(v, s): d for v, s, d in zip(*(result[c].to_pylist() for c in ("vertex", "source", "distance")))}


def weighted(seed: int) -> pa.Table:
    table = awkward_graph(seed)
    rng = np.random.default_rng(seed)
    return table.append_column("w", pa.array(rng.integers(0, 20, table.num_rows).astype(float)))


@pytest.mark.parametrize("layout", [dict(workers=1), dict(workers=2), dict(workers=1, processes=2)])
def test_hops_and_weights_match_dijkstra(layout):
    table = weighted(9)
    src, dst, w = (table[c].to_pylist() for c in ("src", "dst", "w"))
    sources = [src[0], 30_000, dst[5]]                       # includes the star's hub
    hops = shortest_paths(table, sources, timeout=60, **layout)
    assert hops.schema.field("distance").type == pa.int64()
    assert as_dict(hops) == dijkstra_reference(src, dst, sources)
    dist = shortest_paths(table, sources, weight="w", timeout=60, **layout)
    assert as_dict(dist) == dijkstra_reference(src, dst, sources, w)


def test_long_path_runs_many_rounds_and_unreachable_is_absent():
    path = np.arange(400, dtype=np.int64)
    table = pa.table({"src": path[:-1], "dst": path[1:]})
    result = shortest_paths(pd.DataFrame(table.to_pydict()), [200], workers=2, timeout=60)
    assert isinstance(result, pd.DataFrame)
    assert result["vertex"].tolist() == list(range(200, 400))
    assert result["distance"].tolist() == list(range(200))


@pytest.mark.parametrize("kwargs, what", [
    (dict(sources=[123456]), "sources"),
    (dict(sources=[1], weight="w"), "w"),
    (dict(sources=[1], weight="nope"), "nope"),
    (dict(sources=["a"]), "sources"),
])
def test_bad_input(kwargs, what):
    table = pa.table({"src": [1, 2], "dst": [2, 3], "w": [1.0, -2.0]})
    with pytest.raises(GraphInputError, match=repr(what) if what != "sources" else "sources") as info:
        shortest_paths(table, timeout=30, **kwargs)
    assert info.value.what == what


def test_empty_graph_gives_empty_result():
    empty = pa.table({"src": pa.array([], pa.int64()), "dst": pa.array([], pa.int64())})
    assert shortest_paths(empty, [], workers=2, timeout=30).num_rows == 0


def test_stream_form_over_epochs():
    table = awkward_graph(10)
    cuts = [0, 400, table.num_rows]
    sources = [int(table["src"][0].as_py()), int(table["src"][450].as_py())]

    def work(w):
        seen = []

        def build(s):
            inp, edges = s.new_input()
            shortest_paths_stream(edges, sources).inspect_time(lambda t, rb: seen.append((t, rb)))
            return inp

        inp = w.dataflow(build)
        for epoch in range(2):
            part = table.slice(cuts[epoch], cuts[epoch + 1] - cuts[epoch])
            half = part.num_rows // 2
            inp.send_batch(part.slice(0, half) if w.index == 0 else part.slice(half))
            inp.advance_to(epoch + 1)
        inp.close()
        while w.step():
            pass
        return seen

    changes: dict = {}
    for part in ts.execute(work, threads=2, timeout=60):
        for t, rb in part:
            changes.setdefault(t, []).append(rb)
    per_time: dict = {}
    current: dict = {}                                     # the changelog folded, epoch by epoch
    for t in sorted(changes):
        for rb in changes[t]:
            for v, s, d, c in zip(*(rb[k].to_pylist() for k in ("vertex", "source", "distance", "diff"))):
                if c < 0:
                    assert current.pop((v, s)) == d
            for v, s, d, c in zip(*(rb[k].to_pylist() for k in ("vertex", "source", "distance", "diff"))):
                if c > 0:
                    current[(v, s)] = d
        per_time[t] = dict(current)
    for epoch in range(2):
        so_far = table.slice(0, cuts[epoch + 1])
        src, dst = so_far["src"].to_pylist(), so_far["dst"].to_pylist()
        present = [s for s in sources if s in set(src) | set(dst)]
        assert per_time[epoch] == dijkstra_reference(src, dst, present)
