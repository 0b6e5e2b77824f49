"""Nexmark q0-q8 on timely workers against DuckDB's SQL on the same events."""

import pyarrow as pa
import pytest

from timely_spark.errors import ParameterError
from timely_spark.workloads import nexmark
from timely_spark.workloads.nexmark_queries import QUERIES
from timely_spark.workloads.nexmark_run import run_query

from .nexmark_sql import duckdb_answer, rows

COUNT, BATCH, RATE, SEED = 5_000, 1_000, 100.0, 11       # 50 s of event time: several 10 s windows


@pytest.fixture(scope="module")
def tables():
    people, auctions, bids = (pa.Table.from_batches(list(kind)) for kind in
                              zip(*nexmark.batches(COUNT, BATCH, SEED, RATE)))
    return people, auctions, bids


def test_generator_proportions_keys_and_order(tables):
    people, auctions, bids = tables
    assert (people.num_rows, auctions.num_rows, bids.num_rows) == (100, 300, 4600)   # 1 : 3 : 46
    assert people["id"].to_pylist() == list(range(1000, 1100))
    assert auctions["id"].to_pylist() == list(range(1000, 1300))
    # every bid names an auction and a bidder that exist when it is made
    first_auction = dict(zip(auctions["id"].to_pylist(), auctions["date_time"].to_pylist()))
    joined = [first_auction[a] <= t for a, t in zip(bids["auction"].to_pylist(), bids["date_time"].to_pylist())]
    assert all(joined)
    assert max(bids["bidder"].to_pylist()) <= max(people["id"].to_pylist())
    again = pa.Table.from_batches(list(zip(*nexmark.batches(COUNT, 700, SEED, RATE)))[2])
    assert again.equals(bids)                                # the same stream in any batching


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("query", sorted(QUERIES))
def test_query_equals_duckdb(tables, query, workers):
    result = run_query(query, COUNT, batch_events=BATCH, workers=workers, seed=SEED, rate=RATE)
    expected = duckdb_answer(query, *tables)
    assert expected.num_rows > 0, f"{query}: the events give an empty answer; the check would not bite"
    assert result.answer is not None
    assert rows(result.answer, expected.column_names) == rows(expected, expected.column_names)
    assert len(result.latencies) == COUNT // BATCH


def test_bad_parameters_are_named():
    with pytest.raises(ParameterError, match="unknown query 'q9'") as raised:
        run_query("q9", 100)
    assert raised.value.parameter == "query"
    with pytest.raises(ParameterError) as raised:
        nexmark.events(0, 10, rate=0)
    assert raised.value.parameter == "rate"
    with pytest.raises(ParameterError, match="share a millisecond") as raised:
        run_query("q0", 100, batch_events=1, rate=1e6)
    assert raised.value.parameter == "batch_events"
