"""Nexmark queries q0-q8 as timely dataflows on the public columnar API.

Each query is a function ``(people, auctions, bids, epoch) -> Stream`` of three columnar
streams of :mod:`.nexmark` record batches (logical times are ints; ``epoch`` says when a
logical time starts in event time, as ``group_by_window`` takes it -- or None when only
the end of the input closes windows).  The result is a
changelog: ``ts.collection`` of everything it emits is the query's answer on the events
sent (rows with a ``diff`` column; append-only outputs have none).

Definitions (as the Nexmark paper and the Flink/Beam suites state them, over the events
sent so far):

* q0 pass-through: every bid.
* q1 currency conversion: bids with ``price`` in euros (``0.908 * price``, a double).
* q2 selection: ``auction, price`` of the bids whose ``auction % 123 == 0``.
* q3 local item suggestion: ``name, city, state, id`` of auctions of category 10 whose
  seller lives in OR, ID or CA (a running join of people and auctions).
* q4 average price per category: per auction, the highest bid made between its
  creation and its expiry; per category, the mean of those (an interval join of bids
  with the auctions open at their time, then two running aggregates).
* q5 hot items: per sliding window (10 s long, every 2 s), the auctions with the most
  bids, with that count.
* q6 average selling price by seller: per seller, the mean winning price (as q4) of
  its last 10 closed auctions (latest expiry first, then highest id); an auction is
  closed once the first 10 s boundary of event time after its expiry is behind the
  logical time (a temporal filter: auctions close in bulk), and the end of the input
  closes all.
* q7 highest bid: per tumbling 10 s window, the bids with the window's highest price
  (a running join of the window maxima with each time's leading bids per window).
* q8 new users: ``id, name, window_start`` of people who opened an auction in the
  tumbling 10 s window in which they registered (a join on person and window).

>>> from timely_spark.workloads.nexmark_run import run_query
>>> answer = run_query("q2", 5_000, batch_events=1_000).answer
>>> answer.column_names, sorted(set(answer["auction"].to_pylist()))
(['auction', 'price'], [1107, 1230])
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..dataflow import ExchangeBy

if TYPE_CHECKING:
    from ..dataflow.stream import Stream

__all__ = ["QUERIES", "Query"]

Epoch = Union[None, timedelta, int, Callable[[Any], Any]]
Query = Callable[["Stream", "Stream", "Stream", Epoch], "Stream"]

EURO_PER_DOLLAR = 0.908
Q2_MODULUS = 123
Q3_STATES = ["OR", "ID", "CA"]
Q3_CATEGORY = 10
Q5_PERIOD, Q5_EVERY = timedelta(seconds=10), timedelta(seconds=2)
TUMBLE = timedelta(seconds=10)          # q7 and q8's windows
MILLISECOND = timedelta(milliseconds=1)
Q6_LAST = 10                            # closed auctions per seller
Q6_CLOSE_EVERY = timedelta(seconds=10)  # auctions close in bulk, at these boundaries of event time
FOREVER = pc.scalar(np.iinfo(np.int64).max)   # a temporal filter's end that never comes


def q0(people: "Stream", auctions: "Stream", bids: "Stream", epoch: Epoch) -> "Stream":
    """Pass-through: every bid."""
    return bids.select("auction", "bidder", "price", "channel", "url", "date_time", name="Q0")


def q1(people: "Stream", auctions: "Stream", bids: "Stream", epoch: Epoch) -> "Stream":
    """Bids with their price in euros."""
    euros = pc.multiply(pc.field("price").cast(pa.float64()), EURO_PER_DOLLAR)
    return bids.select("auction", "bidder", "date_time", price=euros, name="Q1")


def q2(people: "Stream", auctions: "Stream", bids: "Stream", epoch: Epoch) -> "Stream":
    """The bids on every 123rd auction."""
    auction = pc.field("auction")
    every = pc.equal(pc.subtract(auction, pc.multiply(pc.divide(auction, Q2_MODULUS), Q2_MODULUS)), 0)
    return bids.filter(every, name="Q2").select("auction", "price")


def q3(people: "Stream", auctions: "Stream", bids: "Stream", epoch: Epoch) -> "Stream":
    """Auctions of category 10 by sellers in OR, ID, CA, with the seller's address."""
    local = people.filter(pc.is_in(pc.field("state"), pa.array(Q3_STATES)), name="Q3People") \
                  .select("name", "city", "state", seller=pc.field("id"))
    chosen = auctions.filter(pc.equal(pc.field("category"), Q3_CATEGORY), name="Q3Auctions").select("id", "seller")
    return local.join(chosen, "seller", running=True, name="Q3").select("name", "city", "state", "id", "diff")


def _epoch_ms(epoch: Epoch) -> Optional[int]:
    """Milliseconds of event time per logical time, when ``epoch`` says so (a duration, or
    an int in the timestamps' unit); None otherwise."""
    if isinstance(epoch, timedelta):
        return epoch // MILLISECOND
    return epoch if isinstance(epoch, int) else None


class _OpenAuctions:
    """Per time, the bids that fall within the lifetime of an auction seen so far, at most
    one row per auction (its highest such bid at this time): an interval join whose state
    is the auctions still open.  Rows at logical time ``t`` carry event times at or after
    ``t * epoch_ms``, so once a time is done an auction that expired before it can meet no
    later bid (and a bid, no auction that comes later: an auction opens at its own event
    time) -- its row is dropped; without ``epoch_ms`` every auction is kept."""

    def __init__(self, by: list[str], epoch_ms: Optional[int]) -> None:
        self.by, self.epoch_ms = by, epoch_ms
        self.open: Optional[pa.Table] = None

    def __call__(self, t: int, auctions: list, bids: list) -> Optional[list]:
        if auctions:
            arrived = pa.Table.from_batches(auctions)
            self.open = arrived if self.open is None else pa.concat_tables([self.open, arrived]).combine_chunks()
        out = None
        if bids and self.open is not None and self.open.num_rows:
            joined = pa.Table.from_batches(bids).join(self.open, "auction", use_threads=False)
            stamp = joined["date_time"]
            valid = joined.filter(pc.and_(pc.greater_equal(stamp, joined["opened"]),
                                          pc.less_equal(stamp, joined["expires"])))
            best = valid.group_by(["auction", *self.by], use_threads=False).aggregate([("price", "max")])
            out = best.rename_columns(["auction", *self.by, "price"]).to_batches()
        if self.epoch_ms is not None and self.open is not None:
            bound = pa.scalar(t * self.epoch_ms, pa.int64()).cast(self.open.schema.field("expires").type)
            self.open = self.open.filter(pc.greater_equal(self.open["expires"], bound))
        return out


def _winning_bids(auctions: "Stream", bids: "Stream", by: list[str], epoch: Epoch, name: str) -> "Stream":
    """Per auction (and the auction's columns ``by``), the highest bid within its lifetime:
    a running changelog."""
    kept = [*dict.fromkeys([*by, "expires"])]
    lifetimes = auctions.select(*kept, auction=pc.field("id"), opened=pc.field("date_time"))
    placed = bids.select("auction", "price", "date_time")
    valid = lifetimes.per_time(_OpenAuctions(by, _epoch_ms(epoch)), others=[placed],
                               exchange=ExchangeBy(["auction"], f"{name}Join"), name=f"{name}Join")
    return valid.group_by(["auction", *by]).aggregate([("price", "max")], running=True, name=f"{name}Max")


def q4(people: "Stream", auctions: "Stream", bids: "Stream", epoch: Epoch) -> "Stream":
    """Mean winning price per category."""
    winning = _winning_bids(auctions, bids, ["category"], epoch, "Q4")
    return winning.group_by("category").aggregate([("price_max", "mean")], running=True, name="Q4Mean")


def q5(people: "Stream", auctions: "Stream", bids: "Stream", epoch: Epoch) -> "Stream":
    """The auctions with the most bids per sliding window."""
    counts = bids.group_by_window("date_time", every=Q5_EVERY, period=Q5_PERIOD, keys="auction", epoch=epoch,
                                  name="Q5Windows").aggregate([([], "count_all")])
    window = ["window_start", "window_end"]
    most = counts.group_by(window).aggregate([("count_all", "max")], name="Q5Max") \
                 .select(*window, count_all=pc.field("count_all_max"))
    return counts.join(most, [*window, "count_all"], name="Q5")


def q6(people: "Stream", auctions: "Stream", bids: "Stream", epoch: Epoch) -> "Stream":
    """Mean winning price of each seller's last closed auctions."""
    winning = _winning_bids(auctions, bids, ["seller", "expires"], epoch, "Q6")
    epoch_ms = _epoch_ms(epoch)
    if epoch_ms is None:                    # only the end of the input closes auctions
        closes: Any = pc.scalar(pa.scalar(None, pa.int64()))
    else:        # the first logical time past the next Q6_CLOSE_EVERY boundary after the expiry
        every = Q6_CLOSE_EVERY // MILLISECOND
        boundary = pc.multiply(pc.add(pc.divide(pc.field("expires").cast(pa.int64()), every), 1), every)
        closes = pc.divide(pc.add(boundary, epoch_ms - 1), epoch_ms)
    closed = winning.select("auction", "seller", "expires", "price_max", "diff", closes=closes, never=FOREVER) \
                    .valid_during("closes", "never", name="Q6Closed") \
                    .select("auction", "seller", "expires", "price_max", "diff")
    last = closed.group_by("seller").top_k(Q6_LAST, [("expires", "descending"), ("auction", "descending")],
                                           name="Q6Last")
    return last.group_by("seller").aggregate([("price_max", "mean")], running=True, name="Q6Mean")


def _tumble_start(column: str) -> pc.Expression:
    return pc.floor_temporal(pc.field(column), multiple=int(TUMBLE.total_seconds()), unit="second")


def _time_leaders(t: int, bids: list) -> list:
    """The bids of a time (on this worker) with the highest price of their window among
    them: the only ones that can have their window's highest price, so the join keeps
    a few bids per time and window instead of every bid."""
    table = pa.Table.from_batches(bids)
    best = table.group_by("window_start", use_threads=False).aggregate([("price", "max")])
    joined = table.join(best, "window_start", use_threads=False)
    return joined.filter(pc.equal(joined["price"], joined["price_max"])).drop_columns(["price_max"]).to_batches()


def q7(people: "Stream", auctions: "Stream", bids: "Stream", epoch: Epoch) -> "Stream":
    """The bids with the highest price of their tumbling window."""
    highest = bids.group_by_window("date_time", every=TUMBLE, epoch=epoch, name="Q7Windows") \
                  .aggregate([("price", "max")]).select("window_start", price=pc.field("price_max"))
    placed = bids.select("auction", "bidder", "price", "date_time", window_start=_tumble_start("date_time")) \
                 .per_time(_time_leaders, name="Q7Leaders")
    return placed.join(highest, ["window_start", "price"], running=True, name="Q7") \
                 .select("auction", "bidder", "price", "date_time", "window_start", "diff")


def q8(people: "Stream", auctions: "Stream", bids: "Stream", epoch: Epoch) -> "Stream":
    """People who opened an auction in the window they registered in."""
    joined = people.select("id", "name", window_start=_tumble_start("date_time")).join(
        auctions.select(id=pc.field("seller"), window_start=_tumble_start("date_time")), ["id", "window_start"],
        running=True, name="Q8Join")
    return joined.distinct(name="Q8")


QUERIES: dict[str, Query] = {"q0": q0, "q1": q1, "q2": q2, "q3": q3, "q4": q4, "q5": q5, "q6": q6, "q7": q7,
                             "q8": q8}
