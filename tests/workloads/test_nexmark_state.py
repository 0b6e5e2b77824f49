"""Nexmark q4/q6's open auctions on the engine's keyed store: a checkpointed run stopped
part way and restored (into the same or another worker count) gives DuckDB's answer and
the uninterrupted run's; the open-auction state stays bounded over many epochs."""

from datetime import timedelta

import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.workloads import nexmark
from timely_spark.workloads.nexmark_queries import QUERIES, _OpenAuctions

from .nexmark_sql import duckdb_answer, rows

COUNT, BATCH, RATE, SEED = 5_000, 500, 100.0, 11          # 10 epochs of 5 s of event time
EPOCHS = COUNT // BATCH
LONG = 60                                                  # epochs of the bounded-state test
TIMES = [nexmark.BASE_TIME_MS + int(e * BATCH * 1000.0 / RATE) for e in range(LONG + 1)]
QUERY_NAMES = ("q4", "q6")
MS = timedelta(milliseconds=1)


def nexmark_work(stop_after=None, epochs=EPOCHS):
    """A worker function: q4 and q6 over the events from the restored epoch (0 on a fresh
    start) to the end, or to epoch ``stop_after`` (then the inputs close: a final
    snapshot); returns ``(restored_time, {query: [(time, batch), ...]})``."""
    def work(worker):
        out = {q: [] for q in QUERY_NAMES}

        def build(scope):
            inputs = [scope.new_input() for _ in range(3)]
            streams = [s for _, s in inputs]
            probes = []
            for q in QUERY_NAMES:
                result = QUERIES[q](*streams, MS)
                result.inspect_time(lambda t, b, q=q: out[q].append((t, b)))
                probes.append(result.probe())
            return [h for h, _ in inputs], probes

        handles, probes = worker.dataflow(build)
        first = TIMES.index(worker.restored_time) if worker.restored_time is not None else 0
        last = epochs if stop_after is None else stop_after
        for e in range(first, last):
            for handle in handles:
                handle.advance_to(TIMES[e])
            if e % worker.peers == worker.index:
                for handle, batch in zip(handles, nexmark.events(e * BATCH, BATCH, SEED, RATE)):
                    handle.send_batch(batch)
            for handle in handles:
                handle.advance_to(TIMES[e + 1])
            worker.step_while(lambda: any(p.less_than(TIMES[e + 1]) for p in probes), timeout=60)
        return worker.restored_time, out
    return work


def answers(runs):
    """Per query, the collection of the output of ``runs`` (a list of ``(results, since,
    until)``: every worker's output at times in ``[since, until)``)."""
    got = {}
    for q in QUERY_NAMES:
        batches = [b for results, since, until in runs for _, out in results for t, b in out[q]
                   if since <= t < until and b.num_rows]
        got[q] = ts.collection(pa.Table.from_batches(batches))
    return got


@pytest.fixture(scope="module")
def expected():
    tables = [pa.Table.from_batches(list(kind)) for kind in zip(*nexmark.batches(COUNT, BATCH, SEED, RATE))]
    return {q: duckdb_answer(q, *tables) for q in QUERY_NAMES}


@pytest.fixture(scope="module")
def uninterrupted(expected):
    got = answers([(ts.execute(nexmark_work(), threads=2), 0, float("inf"))])
    for q in QUERY_NAMES:
        columns = expected[q].column_names
        assert expected[q].num_rows > 0
        assert rows(got[q], columns) == rows(expected[q], columns), q
    return got


@pytest.mark.parametrize("before, after", [(2, 2), (1, 2), (2, 3)])
def test_q4_q6_stopped_and_restored_equal_duckdb(tmp_path, expected, uninterrupted, before, after):
    checkpoint = str(tmp_path)
    first = ts.execute(nexmark_work(stop_after=6), checkpoint=checkpoint, threads=before)
    second = ts.execute(nexmark_work(), checkpoint=checkpoint, threads=after)
    cut = second[0][0]
    assert cut is not None and TIMES[1] < cut < TIMES[-1]        # restored mid-stream
    got = answers([(first, 0, cut), (second, cut, float("inf"))])
    for q in QUERY_NAMES:
        columns = expected[q].column_names
        assert rows(got[q], columns) == rows(expected[q], columns), q
        assert rows(got[q], columns) == rows(uninterrupted[q], columns), q
    assert ts.state.read_snapshot(checkpoint, "Q4Join").num_rows > 0     # the open auctions were saved


@pytest.mark.slow
def test_open_auctions_stay_bounded(tmp_path):
    """The open auctions held (Q4Join's snapshot; q4 and q6 share the join) do not grow
    with the auctions seen: an auction leaves once the logical time passes its expiry."""
    checkpoint = str(tmp_path)
    stops = (20, 40, 60)
    held = []
    for stop in stops:
        ts.execute(nexmark_work(stop_after=stop, epochs=LONG), checkpoint=checkpoint, threads=1)
        held.append(ts.state.read_snapshot(checkpoint, "Q4Join").num_rows)
    seen = [stop * BATCH * 3 // 50 for stop in stops]          # auctions are 3 in 50 events
    assert 0 < held[-1] < seen[-1] / 4 and held[-1] <= 1.5 * held[0], (held, seen)


def test_the_store_of_open_auctions_stays_bounded():
    """What the join's keyed store holds (expired auctions not yet merged away included)
    stays within a small multiple of the auctions open at a time, over 200 epochs."""
    join = _OpenAuctions(["category"], 1, "Q4Join")
    held = []
    for e in range(200):
        _, auctions, bids = nexmark.events(e * BATCH, BATCH, SEED, RATE)
        lifetimes = pa.Table.from_batches([auctions]).select(["category", "expires", "id", "date_time"]) \
                      .rename_columns(["category", "expires", "auction", "opened"])
        placed = pa.Table.from_batches([bids]).select(["auction", "price", "date_time"])
        join(nexmark.BASE_TIME_MS + int(e * BATCH * 1000.0 / RATE), lifetimes.to_batches(), placed.to_batches())
        held.append(join.open.rows)
    assert max(held[100:]) < 200 * BATCH * 3 // 50 / 10, held[-20:]     # not the 6,000 auctions seen
    assert max(held[100:]) <= 2 * max(held[20:100]), (max(held[20:100]), max(held[100:]))
