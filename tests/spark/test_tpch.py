"""TPC-H views kept current under refresh in Spark barrier tasks (``ts.spark.run``): each
task reads the Parquet tables itself; after the load and after every refresh, the view
equals DuckDB running the query on the refreshed tables."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import timely_spark as ts
from timely_spark.workloads import tpch
from timely_spark.workloads.tpch_run import run_view_on_spark
from timely_spark.workloads.tpch_sql import duckdb_answer, refreshed, same

REFRESHES = 2


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    cli = shutil.which("tpchgen-cli") or str(Path(sys.executable).parent / "tpchgen-cli")
    directory = tmp_path_factory.mktemp("tpch")
    subprocess.run([cli, "parquet", "-s", "0.01", "--output-dir", str(directory), "-q"], check=True, timeout=300)
    tables = tpch.read_tables(str(directory))
    return str(directory), tables, tpch.refreshes(tables, REFRESHES, seed=5)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("query", ["q3", "q5", "q10"])
def test_view_in_barrier_tasks_equals_duckdb_after_every_refresh(spark, data, query):
    directory, tables, refreshes = data
    view = run_view_on_spark(spark, query, directory, refreshes, workers=2)
    assert len(view.seconds) == REFRESHES + 1
    for t in range(REFRESHES + 1):
        expected = duckdb_answer(query, refreshed(tables, refreshes, t))
        got = ts.collection(view.changelog, as_of=t)
        assert expected.num_rows > 0
        assert same(got, expected, expected.column_names), (query, t)
