"""The Nexmark event stream: people, auctions and bids of an online auction, as Arrow.

Written from the benchmark's published description (Tucker et al., *NEXMark -- A
Benchmark for Queries over Data Streams*, and the generators of Apache Beam and Flink
read as references): events are numbered ``0, 1, 2, ...``; of every 50 consecutive
events 1 is a new person, 3 are new auctions and 46 are bids (the standard 1:3:46
proportions).  Event ``n`` happens at ``BASE_TIME + n / rate`` (``rate`` events per
second of event time, evenly spaced).  Person ids and auction ids count from 1000 in
order of creation, so the ``k``-th person is ``1000 + k``; an auction's seller and a
bid's bidder are people that already exist, a bid's auction one that already exists --
a "hot" one (the latest multiple of :data:`HOT_EVERY`) with probability 1/2 for
auctions and 1/4 for bidders, else one of the last :data:`ACTIVE_AUCTIONS` auctions or
:data:`ACTIVE_PEOPLE` people.  Prices (cents) are log-uniform from $1 to $1,000,000; an
auction's category is one of 10..14; it expires after a random length of up to twice
the time :data:`ACTIVE_AUCTIONS` auctions take to be created.

Every value is a function of the seed and the event number only (a counter-based hash,
no sequential random state), so any slice of the stream is generated alone, in numpy,
and the stream is the same in any batching.  The ``extra`` padding columns of the
reference generators are left out.

>>> from timely_spark.workloads.nexmark import events
>>> people, auctions, bids = events(0, 100, seed=1)
>>> people.num_rows, auctions.num_rows, bids.num_rows
(2, 6, 92)
>>> bids.column_names
['auction', 'bidder', 'price', 'channel', 'url', 'date_time']
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ParameterError

__all__ = ["AUCTION_SCHEMA", "BID_SCHEMA", "PERSON_SCHEMA", "batches", "events", "write_parquet"]

PERIOD = 50                      # events per cycle: 1 person, 3 auctions, 46 bids
PEOPLE_PER_PERIOD, AUCTIONS_PER_PERIOD = 1, 3
FIRST_ID = 1000                  # ids of people and of auctions count from here
BASE_TIME_MS = 1_436_918_400_000  # 2015-07-15 00:00:00 UTC, the event time of event 0
ACTIVE_AUCTIONS = 100            # a cold bid goes to one of the latest this many auctions
ACTIVE_PEOPLE = 1000             # a cold bidder or seller is one of the latest this many people
HOT_EVERY = 100                  # a hot auction or person: the latest id that is a multiple of this
HOT_AUCTION_ODDS = 2             # 1 in this many bids goes to a hot auction
HOT_BIDDER_ODDS = 4              # 1 in this many bids comes from a hot bidder
HOT_SELLER_ODDS = 4              # 1 in this many auctions is sold by a hot seller
CATEGORIES, FIRST_CATEGORY = 5, 10

FIRST_NAMES = pa.array(["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"])
LAST_NAMES = pa.array(["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"])
STATES = pa.array(["AZ", "CA", "ID", "OR", "WA", "WY"])
CITIES = pa.array(["Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle",
                   "Kent", "Cheyenne"])
CHANNELS = pa.array(["Google", "Facebook", "Baidu", "Apple"])
URLS = pa.array([f"https://www.nexmark.com/{c}/item.htm?query=1&channel_id={i}"
                 for i, c in enumerate(["google", "facebook", "baidu", "apple"])])

TIME = pa.timestamp("ms")
PERSON_SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("email_address", pa.string()),
                           ("credit_card", pa.string()), ("city", pa.string()), ("state", pa.string()),
                           ("date_time", TIME)])
AUCTION_SCHEMA = pa.schema([("id", pa.int64()), ("item_name", pa.string()), ("description", pa.string()),
                            ("initial_bid", pa.int64()), ("reserve", pa.int64()), ("date_time", TIME),
                            ("expires", TIME), ("seller", pa.int64()), ("category", pa.int64())])
BID_SCHEMA = pa.schema([("auction", pa.int64()), ("bidder", pa.int64()), ("price", pa.int64()),
                        ("channel", pa.string()), ("url", pa.string()), ("date_time", TIME)])

_M1, _M2, _GOLD = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)


def _hash(seed: int, n: np.ndarray, field: int) -> np.ndarray:
    """A uint64 per event number: splitmix64 of (seed, field, n) -- counter-based, so any
    slice of the stream is the same however it is cut."""
    with np.errstate(over="ignore"):
        z = n.astype(np.uint64) * _GOLD + np.uint64((seed * 0x100000001B3 + field * 0x9E37) & 0xFFFFFFFFFFFFFFFF)
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def _below(seed: int, n: np.ndarray, field: int, bound: int) -> np.ndarray:
    """An int in ``[0, bound)`` per event number."""
    return (_hash(seed, n, field) % np.uint64(bound)).astype(np.int64)


def _unit(seed: int, n: np.ndarray, field: int) -> np.ndarray:
    """A float in ``[0, 1)`` per event number."""
    return (_hash(seed, n, field) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def _pick(values: pa.Array, index: np.ndarray) -> pa.Array:
    return values.take(pa.array(index))


def _times(n: np.ndarray, rate: float) -> pa.Array:
    return pa.array(BASE_TIME_MS + (n * 1000.0 / rate).astype(np.int64), TIME)


def _choose(seed: int, n: np.ndarray, field: int, latest: np.ndarray, active: int, hot_odds: int) -> np.ndarray:
    """An existing id per event: hot (the latest multiple of HOT_EVERY) 1 in ``hot_odds``,
    else one of the ``active`` latest ids; never below FIRST_ID."""
    hot = np.maximum((latest // HOT_EVERY) * HOT_EVERY, FIRST_ID)
    span = np.minimum(active, latest - FIRST_ID + 1).astype(np.uint64)      # as many as exist
    cold = latest - (_hash(seed, n, field) % span).astype(np.int64)
    return np.where(_below(seed, n, field + 1, hot_odds) == 0, hot, cold)


def _people(n: np.ndarray, seed: int, rate: float) -> pa.RecordBatch:
    ids = FIRST_ID + n // PERIOD
    first = _pick(FIRST_NAMES, _below(seed, n, 1, len(FIRST_NAMES)))
    last = _pick(LAST_NAMES, _below(seed, n, 2, len(LAST_NAMES)))
    name = pc.binary_join_element_wise(first, last, " ")
    email = pc.binary_join_element_wise(first, pc.cast(pa.array(ids), pa.string()), "@nexmark.com", "")
    card = pc.cast(pa.array(1_000_000_000_000_000 + _below(seed, n, 3, 9 * 10**15)), pa.string())
    city = _pick(CITIES, _below(seed, n, 4, len(CITIES)))
    state = _pick(STATES, _below(seed, n, 5, len(STATES)))
    return pa.RecordBatch.from_arrays([pa.array(ids), name, email, card, city, state, _times(n, rate)],
                                      schema=PERSON_SCHEMA)


def _auctions(n: np.ndarray, seed: int, rate: float) -> pa.RecordBatch:
    cycle, offset = n // PERIOD, n % PERIOD
    ids = FIRST_ID + cycle * AUCTIONS_PER_PERIOD + (offset - PEOPLE_PER_PERIOD)
    seller = _choose(seed, n, 10, FIRST_ID + cycle, ACTIVE_PEOPLE, HOT_SELLER_ODDS)
    initial = np.round(np.power(10.0, _unit(seed, n, 12) * 6.0) * 100).astype(np.int64)
    reserve = initial + np.round(np.power(10.0, _unit(seed, n, 13) * 6.0) * 100).astype(np.int64)
    created = BASE_TIME_MS + (n * 1000.0 / rate).astype(np.int64)
    span_ms = ACTIVE_AUCTIONS * PERIOD / AUCTIONS_PER_PERIOD * 1000.0 / rate
    length = 1 + (_unit(seed, n, 14) * 2 * span_ms).astype(np.int64)
    item = pc.binary_join_element_wise("item-", pc.cast(pa.array(ids), pa.string()), "")
    description = pc.binary_join_element_wise("description of item ", pc.cast(pa.array(ids), pa.string()), "")
    category = FIRST_CATEGORY + _below(seed, n, 15, CATEGORIES)
    return pa.RecordBatch.from_arrays(
        [pa.array(ids), item, description, pa.array(initial), pa.array(reserve), pa.array(created, TIME),
         pa.array(created + length, TIME), pa.array(seller), pa.array(category)], schema=AUCTION_SCHEMA)


def _bids(n: np.ndarray, seed: int, rate: float) -> pa.RecordBatch:
    cycle = n // PERIOD
    latest_auction = FIRST_ID + cycle * AUCTIONS_PER_PERIOD + AUCTIONS_PER_PERIOD - 1
    auction = _choose(seed, n, 20, latest_auction, ACTIVE_AUCTIONS, HOT_AUCTION_ODDS)
    bidder = _choose(seed, n, 22, FIRST_ID + cycle, ACTIVE_PEOPLE, HOT_BIDDER_ODDS)
    price = np.round(np.power(10.0, _unit(seed, n, 24) * 6.0) * 100).astype(np.int64)
    which = _below(seed, n, 25, len(CHANNELS))
    return pa.RecordBatch.from_arrays([pa.array(auction), pa.array(bidder), pa.array(price),
                                       _pick(CHANNELS, which), _pick(URLS, which), _times(n, rate)],
                                      schema=BID_SCHEMA)


def events(start: int, count: int, seed: int = 0, rate: float = 10_000.0
           ) -> tuple[pa.RecordBatch, pa.RecordBatch, pa.RecordBatch]:
    """Events ``start .. start + count - 1`` of the stream as three record batches:
    ``(people, auctions, bids)`` (schemas :data:`PERSON_SCHEMA`, :data:`AUCTION_SCHEMA`,
    :data:`BID_SCHEMA`; ``date_time`` a millisecond timestamp), each in event order.
    ``rate``: events per second of event time.

    >>> people, auctions, bids = events(0, 50, seed=7)
    >>> people["id"].to_pylist(), auctions["id"].to_pylist()
    ([1000], [1000, 1001, 1002])
    """
    if start < 0 or count < 0 or rate <= 0:
        raise ParameterError(f"nexmark events: start={start}, count={count}, rate={rate} must be >= 0, >= 0, > 0",
                             "start" if start < 0 else "count" if count < 0 else "rate")
    n = np.arange(start, start + count, dtype=np.int64)
    offset = n % PERIOD
    is_person = offset < PEOPLE_PER_PERIOD
    is_auction = ~is_person & (offset < PEOPLE_PER_PERIOD + AUCTIONS_PER_PERIOD)
    is_bid = ~is_person & ~is_auction
    return _people(n[is_person], seed, rate), _auctions(n[is_auction], seed, rate), _bids(n[is_bid], seed, rate)


def batches(count: int, batch_events: int = 100_000, seed: int = 0, rate: float = 10_000.0
            ) -> Iterator[tuple[pa.RecordBatch, pa.RecordBatch, pa.RecordBatch]]:
    """:func:`events` of the first ``count`` events, ``batch_events`` at a time.

    >>> sum(b.num_rows for _, _, b in batches(1000, batch_events=300))
    920
    """
    for start in range(0, count, batch_events):
        yield events(start, min(batch_events, count - start), seed, rate)


def write_parquet(directory: str, count: int, batch_events: int = 100_000, seed: int = 0,
                  rate: float = 10_000.0) -> None:
    """Write the first ``count`` events under ``directory`` as Parquet: one file per
    ``batch_events`` events in each of ``people/``, ``auctions/`` and ``bids/`` (named by
    the batch's number, zero-padded, so file order is event order) -- the input a Spark
    reference reads, with ``spark.read`` or ``spark.readStream``."""
    import os

    import pyarrow.parquet as pq

    for number, parts in enumerate(batches(count, batch_events, seed, rate)):
        for kind, batch in zip(("people", "auctions", "bids"), parts):
            os.makedirs(os.path.join(directory, kind), exist_ok=True)
            pq.write_table(pa.Table.from_batches([batch]), os.path.join(directory, kind, f"part-{number:06d}.parquet"))
