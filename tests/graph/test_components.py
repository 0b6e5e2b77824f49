import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.graph import GraphInputError, connected_components, forest, snapshot_components, union_find

from .graphs import awkward_graph


def reference(table: pa.Table) -> dict:
    return union_find(zip(table["src"].to_pylist(), table["dst"].to_pylist()))


def as_dict(table: pa.Table) -> dict:
    return dict(zip(table["vertex"].to_pylist(), table["component"].to_pylist()))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_forest_matches_union_find(seed):
    table = awkward_graph(seed)
    v, c = forest(table["src"].to_numpy(), table["dst"].to_numpy())
    assert dict(zip(v.tolist(), c.tolist())) == reference(table)


@pytest.mark.parametrize("layout", [dict(workers=1), dict(workers=2), dict(workers=1, processes=2)])
def test_connected_components_local(layout):
    table = awkward_graph(3)
    result = connected_components(table, **layout, timeout=60)
    assert result["vertex"].to_pylist() == sorted(result["vertex"].to_pylist())
    assert as_dict(result) == reference(table)


def test_pandas_in_pandas_out_and_column_names():
    frame = pd.DataFrame({"a": [5, 1, 7], "b": [1, 2, 8]})
    result = connected_components(frame, src="a", dst="b")
    assert isinstance(result, pd.DataFrame)
    assert result.to_dict("list") == {"vertex": [1, 2, 5, 7, 8], "component": [1, 1, 1, 7, 7]}


def test_empty_graph_gives_empty_result():
    empty = pa.table({"src": pa.array([], pa.int64()), "dst": pa.array([], pa.int64())})
    result = connected_components(empty, workers=2, timeout=30)
    assert result.num_rows == 0 and result.column_names == ["vertex", "component"]


@pytest.mark.parametrize("table, what", [
    (pa.table({"src": [1], "other": [2]}), "dst"),
    (pa.table({"src": [1, None], "dst": [2, 3]}), "src"),
    (pa.table({"src": [1.5], "dst": [2.0]}), "src"),
])
def test_bad_input_names_the_column(table, what):
    with pytest.raises(GraphInputError, match=repr(what)) as info:
        connected_components(table, timeout=30)
    assert info.value.what == what


def test_stream_form_over_epochs_is_cumulative():
    table = awkward_graph(4)
    n = table.num_rows
    cuts = [0, n // 3, 2 * n // 3, n]

    def work(w):
        seen = []

        def build(s):
            inp, edges = s.new_input()
            snapshot_components(edges).inspect_time(lambda t, rb: seen.append((t, rb)))
            return inp

        inp = w.dataflow(build)
        for epoch in range(3):
            lo, hi = cuts[epoch], cuts[epoch + 1]
            mine = table.slice(lo, hi - lo)
            half = mine.num_rows // 2
            inp.send_batch(mine.slice(0, half) if w.index == 0 else mine.slice(half))
            inp.advance_to(epoch + 1)
        inp.close()
        while w.step():
            pass
        return seen

    per_time: dict = {}
    for part in ts.execute(work, threads=2, timeout=60):
        for t, rb in part:
            per_time.setdefault(t, {}).update(as_dict(pa.Table.from_batches([rb])))
    assert sorted(per_time) == [0, 1, 2]
    for epoch in range(3):
        assert per_time[epoch] == reference(table.slice(0, cuts[epoch + 1]))


def test_forest_long_path_and_large_ids():
    ids = np.arange(5000, dtype=np.int64) * 1_000_003 + 2**40
    v, c = forest(ids[::-1][:-1], ids[::-1][1:])
    assert v.tolist() == ids.tolist() and set(c.tolist()) == {int(ids[0])}
