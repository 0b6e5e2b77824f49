"""ts.graph with vertex ids that are not int64: strings, binaries, dates, uint64 at and
above 2**63 -- checked against the integer-id results on the same graph."""

import datetime

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from timely_spark.graph import (
    GraphInputError,
    connected_components,
    dijkstra_reference,
    pagerank,
    pagerank_reference,
    shortest_paths,
    union_find,
)

from .graphs import awkward_graph


def as_strings(ids: pa.Array) -> pa.Array:
    """``17`` -> ``"17@x"``: one string per id, whose order is not the ids' order ("10@x" < "9@x")."""
    return pc.binary_join_element_wise(pc.cast(ids, pa.string()), "@x", "")


def relabelled(table: pa.Table, convert) -> tuple[pa.Table, dict]:
    """The same graph with ids converted, and ``{int id: converted id}``."""
    ints = pc.unique(pa.concat_arrays([table["src"].combine_chunks(), table["dst"].combine_chunks()]))
    mapping = dict(zip(ints.to_pylist(), convert(ints).to_pylist()))
    src, dst = (convert(table[c].combine_chunks()) for c in ("src", "dst"))
    return pa.table({"src": src, "dst": dst, **({"w": table["w"]} if "w" in table.column_names else {})}), mapping


def expected_components(table: pa.Table, mapping: dict) -> dict:
    """``{converted vertex: smallest converted id of its component}`` from the integer union-find."""
    members: dict = {}
    for v, root in union_find(zip(table["src"].to_pylist(), table["dst"].to_pylist())).items():
        members.setdefault(root, []).append(mapping[v])
    return {v: min(vs) for vs in members.values() for v in vs}


CONVERSIONS = {
    "string": as_strings,
    "large_string": lambda ids: as_strings(ids).cast(pa.large_string()),
    "binary": lambda ids: as_strings(ids).cast(pa.binary()),
    "date": lambda ids: pc.cast(ids, pa.int32()).cast(pa.date32()),
    "uint64 >= 2**63": lambda ids: pa.array(ids.to_numpy().astype(np.uint64) + np.uint64(2**63 - 500), pa.uint64()),
}


@pytest.mark.parametrize("kind", sorted(CONVERSIONS))
@pytest.mark.parametrize("layout", [dict(workers=2), dict(workers=1, processes=2)])
def test_components_with_other_ids_match_the_integer_result(kind, layout):
    table = awkward_graph(12)
    converted, mapping = relabelled(table, CONVERSIONS[kind])
    result = connected_components(converted, timeout=120, **layout)
    assert result.schema.field("vertex").type == converted["src"].type
    got = dict(zip(result["vertex"].to_pylist(), result["component"].to_pylist()))
    assert got == expected_components(table, mapping)


@pytest.mark.parametrize("kind", ["string", "uint64 >= 2**63"])
def test_pagerank_and_shortest_paths_with_other_ids_match_the_integer_result(kind):
    table = awkward_graph(13)
    table = table.append_column("w", pa.array(np.random.default_rng(1).integers(0, 9, table.num_rows) * 1.0))
    converted, mapping = relabelled(table, CONVERSIONS[kind])
    ranks = pagerank(converted, workers=2, timeout=120)
    ref = pagerank_reference(table["src"].to_numpy(), table["dst"].to_numpy())
    got = dict(zip(ranks["vertex"].to_pylist(), ranks["rank"].to_pylist()))
    assert sorted(got) == sorted(mapping[v] for v in ref)
    assert max(abs(got[mapping[v]] - r) for v, r in ref.items()) < 1e-12

    src, dst, w = (table[c].to_pylist() for c in ("src", "dst", "w"))
    sources = [src[0], 30_000, dst[7]]
    for weight in (None, "w"):
        paths = shortest_paths(converted, [mapping[s] for s in sources], weight, workers=2, timeout=120)
        got = {(v, s): d for v, s, d in zip(*(paths[c].to_pylist() for c in ("vertex", "source", "distance")))}
        want = dijkstra_reference(src, dst, sources, None if weight is None else w)
        assert got == {(mapping[v], mapping[s]): d for (v, s), d in want.items()}


def test_uint64_ids_at_and_above_2_63_stay_exact():
    top = 2**64 - 1
    edges = pa.table({"src": pa.array([2**63, 2**63 + 5, 3, top], pa.uint64()),
                      "dst": pa.array([2**63 - 1, 2**63, 2**63 + 5, 7], pa.uint64())})
    components = connected_components(edges, workers=2, timeout=60)
    assert components.to_pydict() == {"vertex": [3, 7, 2**63 - 1, 2**63, 2**63 + 5, top],
                                      "component": [3, 7, 3, 3, 3, 7]}
    assert pagerank(edges, workers=2, timeout=60)["vertex"].to_pylist() == [3, 7, 2**63 - 1, 2**63, 2**63 + 5, top]
    paths = shortest_paths(edges, [2**63 + 5, top], workers=2, timeout=60)
    assert paths.to_pydict() == {"vertex": [7, 2**63 - 1, 2**63, 2**63 + 5, top],
                                 "source": [top, 2**63 + 5, 2**63 + 5, 2**63 + 5, top],
                                 "distance": [1, 2, 1, 0, 0]}
    with pytest.raises(GraphInputError, match=r"sources not in the graph: \[18446744073709551614\]"):
        shortest_paths(edges, [top - 1], timeout=60)


def test_string_ids_from_pandas_and_the_smallest_string_labels_the_component():
    frame = pd.DataFrame({"a": ["bob@x", "cy@x", "al@x", "zed@x"], "b": ["al@x", "bob@x", "dee@x", "eve@x"]})
    result = connected_components(frame, src="a", dst="b", workers=2, timeout=60)
    assert isinstance(result, pd.DataFrame)
    assert result.to_dict("list") == {"vertex": ["al@x", "bob@x", "cy@x", "dee@x", "eve@x", "zed@x"],
                                      "component": ["al@x"] * 4 + ["eve@x"] * 2}
    categorical = frame.astype("category")                      # dictionary-encoded columns
    assert connected_components(categorical, src="a", dst="b", timeout=60).to_dict("list") == result.to_dict("list")


def test_dates_and_timestamps_are_ids():
    day = datetime.date(2024, 1, 1)
    edges = pa.table({"src": [day, datetime.date(2023, 5, 5)], "dst": [datetime.date(2022, 1, 1), day]})
    assert connected_components(edges, timeout=60)["component"].to_pylist() == [datetime.date(2022, 1, 1)] * 3
    stamps = edges.cast(pa.schema([("src", pa.timestamp("us")), ("dst", pa.timestamp("us"))]))
    assert connected_components(stamps, timeout=60)["component"].to_pylist() == [datetime.datetime(2022, 1, 1)] * 3


@pytest.mark.parametrize("edges, match", [
    (pa.table({"src": ["a"], "dst": [1]}), r"columns 'src' and 'dst' hold ids of two types \(string, int64\)"),
    (pa.table({"src": [1.5], "dst": [2.0]}), r"column 'src' is double: floating-point ids are not exact"),
    (pa.table({"src": [[1]], "dst": [[2]]}), r"vertex ids must be integers, strings, .* column 'src' is list"),
    (pa.table({"src": ["a", None], "dst": ["b", "c"]}), r"column 'src' has 1 null vertex ids: drop or fill"),
])
def test_ids_that_cannot_be_taken_name_the_column(edges, match):
    with pytest.raises(GraphInputError, match=match):
        connected_components(edges, timeout=30)


def test_a_pandas_column_with_none_is_reported_as_nulls_not_as_floats():
    frame = pd.DataFrame({"src": [1, None, 3], "dst": [2, 3, 4]})       # pandas makes src float64 with NaN
    with pytest.raises(GraphInputError, match=r"column 'src' has 1 null vertex ids \(pandas stores None in an "
                                              r"integer column as NaN, making it float64\)") as info:
        connected_components(frame, timeout=30)
    assert info.value.what == "src"


def test_sources_of_the_wrong_type_are_named():
    edges = pa.table({"src": ["a", "b"], "dst": ["b", "c"]})
    with pytest.raises(GraphInputError, match=r"sources must be vertex ids of the edges' type \(string\), got \[1\]"):
        shortest_paths(edges, [1], timeout=30)
    with pytest.raises(GraphInputError, match=r"sources not in the graph: \['zz'\]"):
        shortest_paths(edges, ["a", "zz"], timeout=30)


@pytest.mark.parametrize("base", [2**63 + 10, 2**63 - 100])
@pytest.mark.parametrize("workers", [1, 2])
def test_dense_uint64_ids_at_and_above_2_63(workers, base):
    """Dense uint64 ids all >= 2**63, or on both sides of it: the local front door's
    placing of a result by rank works in int64 and must not take them (it raised
    OverflowError, or ArrowInvalid for the ids that wrapped around)."""
    table = awkward_graph(14)
    ids, inverse = np.unique(np.concatenate([table["src"].to_numpy(), table["dst"].to_numpy()]), return_inverse=True)
    table = pa.table({"src": inverse[:table.num_rows], "dst": inverse[table.num_rows:]})     # dense: 0..n-1
    src, dst = (pa.array(table[c].to_numpy().astype(np.uint64) + np.uint64(base), pa.uint64()) for c in ("src", "dst"))
    edges = pa.table({"src": src, "dst": dst})
    want = {v + base: c + base for v, c in union_find(zip(table["src"].to_pylist(), table["dst"].to_pylist())).items()}
    result = connected_components(edges, workers=workers, timeout=60)
    assert result["vertex"].to_pylist() == sorted(want)
    assert dict(zip(result["vertex"].to_pylist(), result["component"].to_pylist())) == want
    assert pagerank(edges, workers=workers, timeout=60)["vertex"].to_pylist() == sorted(want)
