"""TPC-H views kept current under refresh (SF 0.01, RF1 + RF2 per refresh) on timely
workers: after the load and after every refresh, each view equals DuckDB running the
query on the refreshed tables."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import timely_spark as ts
from timely_spark.workloads import tpch
from timely_spark.workloads.tpch_run import run_view
from timely_spark.workloads.tpch_sql import duckdb_answer, refreshed, same

REFRESHES = 3


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    cli = shutil.which("tpchgen-cli") or str(Path(sys.executable).parent / "tpchgen-cli")
    directory = tmp_path_factory.mktemp("tpch")
    subprocess.run([cli, "parquet", "-s", "0.01", "--output-dir", str(directory), "-q"], check=True, timeout=120)
    tables = tpch.read_tables(str(directory))
    return tables, tpch.refreshes(tables, REFRESHES, seed=3)


def test_refreshes_are_rf1_and_rf2(data):
    tables, refreshes = data
    per = len(tables["orders"]) // 1000
    for r in refreshes:
        diffs = r["orders"]["diff"].to_pylist()
        assert diffs.count(1) == diffs.count(-1) == per
        assert set(r["lineitem"]["diff"].to_pylist()) == {1, -1}


@pytest.mark.parametrize("query", sorted(tpch.TPCH_QUERIES))
def test_view_equals_duckdb_after_every_refresh(data, query):
    tables, refreshes = data
    view = run_view(query, tables, refreshes, workers=2)
    assert len(view.seconds) == REFRESHES + 1
    for t in range(REFRESHES + 1):
        expected = duckdb_answer(query, refreshed(tables, refreshes, t))
        assert expected.num_rows > 0
        got = ts.collection(view.changelog, as_of=t)
        assert same(got, expected, expected.column_names), (query, t)
