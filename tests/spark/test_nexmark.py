"""Nexmark q0-q8 in Spark (Structured Streaming from Parquet files for q0-q3, batch for
the rest) on the events the timely workers read: the same answers as timely's, and as
DuckDB's SQL."""

import pyarrow as pa
import pytest

from tests.workloads.nexmark_sql import duckdb_answer, rows
from timely_spark.workloads import nexmark
from timely_spark.workloads.nexmark_queries import QUERIES
from timely_spark.workloads.nexmark_run import run_query
from timely_spark.workloads.nexmark_spark import STREAMING, run_spark

COUNT, BATCH, RATE, SEED = 3_000, 1_000, 100.0, 5


@pytest.fixture(scope="module")
def events_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("nexmark")
    nexmark.write_parquet(str(directory), COUNT, BATCH, SEED, RATE)
    return str(directory)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("query", sorted(QUERIES))
def test_spark_equals_timely_and_duckdb(spark, events_dir, query):
    answer, _, micro_batches = run_spark(spark, query, events_dir)
    timely = run_query(query, COUNT, batch_events=BATCH, workers=2, seed=SEED, rate=RATE).answer
    tables = [pa.Table.from_batches(list(kind)) for kind in zip(*nexmark.batches(COUNT, BATCH, SEED, RATE))]
    expected = duckdb_answer(query, *tables)
    columns = expected.column_names
    assert answer.num_rows > 0 and timely is not None
    assert rows(answer, columns) == rows(timely, columns) == rows(expected, columns)
    if query in STREAMING:                                  # one file of each kind per micro-batch
        assert len(micro_batches) == COUNT // BATCH
