"""TPC-H views kept current under refresh (SF 0.01, RF1 + RF2 per refresh) on timely
workers: after the load and after every refresh, each view equals DuckDB running the
query on the refreshed tables."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest

import timely_spark as ts
from timely_spark.workloads import tpch
from timely_spark.workloads.tpch_run import run_view
from timely_spark.workloads.tpch_sql import duckdb_answer, refreshed, same

REFRESHES = 3


def _generated(tmp_path_factory, scale, refreshes):
    cli = shutil.which("tpchgen-cli") or str(Path(sys.executable).parent / "tpchgen-cli")
    directory = tmp_path_factory.mktemp("tpch")
    subprocess.run([cli, "parquet", "-s", scale, "--output-dir", str(directory), "-q"], check=True, timeout=300)
    tables = tpch.read_tables(str(directory))
    return tables, tpch.refreshes(tables, refreshes, seed=3)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return _generated(tmp_path_factory, "0.01", REFRESHES)


@pytest.fixture(scope="module")
def data_sf_0_1(tmp_path_factory):
    return _generated(tmp_path_factory, "0.1", 2)


def _drawn_by_the_rules(lines, suppliers):
    """Per lineitem: its price is quantity * the part's retail price and its supplier one
    of the part's four (the specification's formulas)."""
    part = lines["l_partkey"].to_numpy()
    retail = (90000 + (part // 10) % 20001 + 100 * (part % 1000)) / 100.0
    priced = np.isclose(lines["l_extendedprice"].to_numpy(), lines["l_quantity"].to_numpy() * retail)
    supplier = np.stack([(part + i * (suppliers // 4 + (part - 1) // suppliers)) % suppliers + 1 for i in range(4)])
    return priced & (supplier == lines["l_suppkey"].to_numpy()).any(axis=0)


def test_refreshes_are_rf1_and_rf2(data):
    tables, refreshes = data
    per = len(tables["orders"]) // 1000
    initial = set(tables["orders"]["o_orderkey"].to_pylist())
    suppliers = len(tables["supplier"])
    assert _drawn_by_the_rules(tables["lineitem"], suppliers).all()      # the formulas hold on the load
    seen = set()
    for r in refreshes:
        diffs = r["orders"]["diff"].to_pylist()
        assert diffs.count(1) == diffs.count(-1) == per
        assert set(r["lineitem"]["diff"].to_pylist()) == {1, -1}
        added = r["orders"].filter(pc.equal(r["orders"]["diff"], 1))
        keys = added["o_orderkey"].to_pylist()
        # RF1: new orders under the keys the sparse load leaves free, by the population rules
        assert not (set(keys) & (initial | seen)) and all(k % 32 >= 8 for k in keys)
        seen |= set(keys)
        assert all(c % 3 for c in added["o_custkey"].to_pylist())
        lines = r["lineitem"].filter(pc.equal(r["lineitem"]["diff"], 1))
        assert set(lines["l_orderkey"].to_pylist()) == set(keys)
        assert _drawn_by_the_rules(lines, suppliers).all()
        ship, receipt = lines["l_shipdate"].to_pylist(), lines["l_receiptdate"].to_pylist()
        assert all(s < e for s, e in zip(ship, receipt))


def _check_every_refresh(data, query):
    tables, refreshes = data
    view = run_view(query, tables, refreshes, workers=2)
    assert len(view.seconds) == len(refreshes) + 1
    for t in range(len(refreshes) + 1):
        expected = duckdb_answer(query, refreshed(tables, refreshes, t))
        assert expected.num_rows > 0
        got = ts.collection(view.changelog, as_of=t)
        assert same(got, expected, expected.column_names), (query, t)


@pytest.mark.parametrize("query", sorted(tpch.TPCH_QUERIES))
def test_view_equals_duckdb_after_every_refresh(data, query):
    _check_every_refresh(data, query)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("query", sorted(tpch.TPCH_QUERIES))
def test_view_equals_duckdb_after_every_refresh_at_sf_0_1(data_sf_0_1, query):
    _check_every_refresh(data_sf_0_1, query)
