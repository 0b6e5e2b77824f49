"""group_by_window(...).aggregate(...): event-time windows, closed exactly by the frontier.

Tumbling (``every``), sliding (``every`` and a longer ``period``) and session
(``gap``) windows over an event-time column (a timestamp, or an integer), grouped by
key columns, with ``group_by``'s aggregates.  Each window is sent once, as soon as
the frontier of the operator's input proves that no row for it can still arrive.

**Event time and logical time.**  A frontier speaks of logical times; a window of
event time.  ``epoch`` says how they meet: every row at logical time ``t`` carries an
event time ``>= epoch_start(t) - allowed_lateness``, where ``epoch_start(t)`` is
``t * epoch`` for a duration (integer logical times; from 0 of the column: the Unix
epoch for timestamps) or ``epoch(t)`` for a function (non-decreasing in ``t``).  So
when the input frontier is the antichain ``F``, no row can still come with an event
time below the *bound* ``min(epoch_start(t) for t in F) - allowed_lateness``:

* a tumbling or sliding window ``[start, end)`` is complete once ``end <= bound``;
* a session ``[first, last + gap)`` once ``last + gap < bound`` (a row at
  ``last + gap`` would still extend it, as in Spark);
* when the input ends (empty frontier), every window is complete.

Two common cases: (a) the logical times *are* event-time buckets -- ``t`` is the
minute of the rows' event time, say: ``epoch=timedelta(minutes=1)`` and a window
closes exactly when the frontier passes its end; (b) epochs of ingestion (1 s,
numbered from the Unix epoch) carrying event times that may lag by up to a minute:
``epoch=timedelta(seconds=1), allowed_lateness=timedelta(minutes=1)``.  Without
``epoch`` the logical times say nothing about event time: windows close when the
input ends (a batch, such as a DataFrame through ``ts.spark.transform``).

Nothing is guessed from the data: unlike a watermark taken from the largest event
time seen (Spark's, one per query), the bound depends only on the frontier, so the
windows, their contents and which rows are late are the same on any number of
workers and in any arrival order.

**Late rows** break the declaration: a row at time ``t`` whose event time is below
``epoch_start(t) - allowed_lateness``.  A late row is never put into a window (its
window may already be sent); ``late="drop"`` counts and drops them
(:attr:`Windowed.late_rows`), ``late="output"`` sends them, unchanged, on
:attr:`Windowed.late` at their logical time.

Output: one table per window result batch with ``window_start``, ``window_end`` (the
time column's type), the keys, then the aggregates named as ``group_by`` names them;
windows without rows are not sent (as Spark's ``groupBy(window(...))``).

**Output times.**  A window is sent at the logical time at which the frontier proved
it complete, never earlier than its rows: with int logical times and ``epoch`` a
duration, the least ``t`` whose frontier ``{t}`` proves it (``end <= t * epoch -
allowed_lateness``; for a session ``<``) -- the same time on any number of workers
and after a restore; otherwise (``epoch`` a function, ``Product`` times, or windows
closed by the end of the input) the join of its rows' earliest time and the input
frontier it closed at (or, when the input ended, the last frontier the operator
held).  The operator holds its capabilities at its input frontier (one per frontier
element, joined with the open rows' times) while windows are open, and none while
none are: an open window never holds a time its input can no longer deliver, so
downstream operators, a captured log, a probe and a snapshot complete every time the
input has completed while a (session) window stays open.  The input is exchanged by
the keys (by none: to worker 0); the rows of open windows are kept (tumbling and
sliding windows share panes, each row kept once) and released when the window is
sent: memory follows the open windows (:attr:`Windowed.open_windows`), not history.

Snapshots keep the rows of open windows that came at logical times before the
snapshot's time, keyed by the keys' hash (all on worker 0 without keys), so they
re-shard; :attr:`Windowed.late_rows` is a count of this run's rows, not restored.  A
window sent at the snapshot's time ``t`` (or later) was closed by the frontier reaching
``t``; its rows are gone, so its result is saved instead (results are kept until the
input frontier passes their time) and the restored operator sends it again at its
time.  Windows open across a snapshot do not hold it back.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union

import numpy as np
import pyarrow as pa

from ...errors import BuildError, CapabilityError, ParameterError, WindowError
from ...progress import Product, less_equal, sort_key
from ..capability import CapabilitySet
from ..channels import Exchange
from ..operator import OperatorBuilder
from .agg_spec import aggregation_spec
from .exchange_by import ExchangeBy, check_batch, check_columns
from .op_state import KEY_HASH
from .window_spec import Clock, Duration, epoch_start, window_spec
from .window_state import Panes, Sent, Sessions

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["Windowed", "group_by_window"]


def _to_first_worker(record: Any) -> int:
    return 0


class Windowed:
    """A stream grouped by event-time windows (``stream.group_by_window(...)``): call
    :meth:`aggregate`.  After that, :attr:`late` (with ``late="output"``),
    :attr:`late_rows` and :attr:`open_windows` tell about this worker's operator.

    >>> import pyarrow as pa, timely_spark as ts
    >>> ts.example(lambda s: s.to_stream(pa.table({"t": [1]})).group_by_window("t", every=10).spec.kind)
    'tumbling'
    """

    def __init__(self, stream: "Stream", spec: Any, keys: list[str], name: str) -> None:
        self.stream, self.spec, self.keys, self.name = stream, spec, keys, name
        self._state: Any = None
        self._late: Optional["Stream"] = None
        self._late_rows = 0
        self._lateness = 0                  # allowed_lateness in the column's unit, once known
        self._built = False

    @property
    def late(self) -> "Stream":
        """The late rows (``late="output"``), at their logical times, unchanged."""
        if self._late is None:
            raise BuildError(f"operator {self.name!r}: late rows have a stream only with late='output' "
                             f"and after aggregate()")
        return self._late

    @property
    def late_rows(self) -> int:
        """How many late rows this worker's operator has dropped or sent to :attr:`late`."""
        return self._late_rows

    @property
    def open_windows(self) -> int:
        """How many windows (sessions) with rows this worker holds open now."""
        return 0 if self._state is None else self._state.open_windows()

    def aggregate(self, aggregations: Sequence[Any], name: Optional[str] = None) -> "Stream":
        """Aggregate ``[(column, function), ...]`` (as :meth:`GroupBy.aggregate
        <timely_spark.dataflow.operators.group_by.GroupBy.aggregate>`: sum, count,
        mean, min, max, ...; ``([], "count_all")`` counts rows) per window and key; a
        stream of record batches ``window_start, window_end, keys..., aggregates...``,
        each window sent once, when complete.

        >>> import pyarrow as pa, timely_spark as ts
        >>> table = pa.table({"t": [0, 3, 9, 10, 14], "v": [1, 2, 3, 4, 5]})
        >>> _ = ts.example(lambda s: s.to_stream(table).group_by_window("t", every=5)
        ...                .aggregate([("v", "sum")]).inspect(lambda rb: print(rb.to_pylist())))
        [{'window_start': 0, 'window_end': 5, 'v_sum': 3}, {'window_start': 5, 'window_end': 10, 'v_sum': 3}, \
{'window_start': 10, 'window_end': 15, 'v_sum': 9}]
        """
        operator = name or self.name
        spec = aggregation_spec(aggregations, operator)
        if self._built:
            raise BuildError(f"operator {operator!r}: aggregate() was already called on this group_by_window")
        self._built = True
        w, keys = self.spec, self.keys
        needed = list(dict.fromkeys(keys + [w.column] + [c for a in spec for c in _columns(a[0])]))
        b = OperatorBuilder(self.stream.scope, operator)
        inp = b.new_input(self.stream, ExchangeBy(keys, operator) if keys else Exchange(_to_first_worker))
        out, result = b.new_output("windows")
        late_out, late_stream = b.new_output("late")
        initial = b.initial_capability()
        held = CapabilitySet()      # where windows may be sent: the open rows' times joined with the frontier
        sent = Sent(keys)           # results at times the frontier has not passed (a snapshot there keeps them)
        self._late = late_stream if w.late == "output" else None
        clocks: list[Clock] = []

        def start(column_type: pa.DataType) -> Clock:
            clock = Clock(column_type, w.column, operator)
            lateness = clock.units(w.lateness, "allowed_lateness")
            if w.kind == "session":
                self._state = Sessions(keys, spec, clock.units(w.gap, "gap"), operator)
            else:
                self._state = Panes(keys, spec, clock.units(w.every, "every"), clock.units(w.period, "period"),
                                    operator)
            if w.epoch is not None and not callable(w.epoch):
                clock.units(w.epoch, "epoch")
            clocks.append(clock)
            self._lateness = lateness
            return clock

        def give(time: Any, table: pa.Table) -> None:
            clock = clocks[0]
            table = table.set_column(0, "window_start", clock.array(table.column(0).to_numpy()))
            table = table.set_column(1, "window_end", clock.array(table.column(1).to_numpy()))
            cap = _capability(held, time)
            out.session(cap).give_batch(table.combine_chunks().to_batches())
            sent.add(cap.time, table)
            cap.drop()

        def send(first: Any, table: pa.Table) -> None:
            """Send closed windows whose rows' earliest logical time is ``first``."""
            if w.epoch is not None and not callable(w.epoch) and isinstance(first, int):
                ends = table.column(1).to_numpy()
                proofs = np.maximum(_proof_times(ends, clocks[0].units(w.epoch, "epoch"), self._lateness,
                                                 w.kind == "session"), first)
                for p in np.unique(proofs).tolist():
                    give(int(p), table.filter(pa.array(proofs == p)) if len(proofs) > 1 else table)
                return
            elements = inp.frontier.elements()
            if elements:
                give(min((_join(first, f) for f in elements), key=sort_key), table)
            else:
                give(first, table)                   # (joined with the last frontier held)

        def save(t: Any) -> pa.Table:
            if self._state is None:
                return sent.save(t, pa.table({KEY_HASH: pa.array([], pa.uint64())}))
            return sent.save(t, self._state.save(t))

        restored = b.keep_state(save, keyed=True)
        resend: list = []
        if restored is not None and restored.num_rows:
            rows, again = sent.split(restored)
            resend = [(initial.delayed(time), table) for time, table in again]
            if rows.num_rows:
                start(rows.schema.field(w.column).type)
                for time in self._state.load(rows):
                    held.insert(initial.delayed(time))
        initial.drop()

        def logic() -> None:
            for cap, table in resend:            # results a snapshot kept: sent at times >= its time
                out.session(cap).give_batch(table.combine_chunks().to_batches())
                cap.drop()
            resend.clear()
            for cap, data in inp:
                for record in data:
                    batch = check_batch(record, operator)
                    if not batch.num_rows:
                        continue
                    check_columns(batch, needed, operator)
                    clock = clocks[0] if clocks else start(batch.schema.field(w.column).type)
                    x = clock.ints(batch.column(w.column), cap.time)
                    if w.epoch is not None:
                        is_late = x < epoch_start(clock, w.epoch, cap.time) - self._lateness
                        if is_late.any():
                            self._late_rows += int(is_late.sum())
                            if w.late == "output":
                                late_out.session(cap).give(batch.filter(pa.array(is_late)))
                            keep = ~is_late
                            batch, x = batch.filter(pa.array(keep)), x[keep]
                            if not batch.num_rows:
                                continue
                    lo, hi = self._state.limits()
                    _check_limits(x, lo, hi, batch, w.column, cap.time, operator)
                    if not any(less_equal(c.time, cap.time) for c in held):
                        held.insert(cap.retain())
                    self._state.add(cap.time, batch.select(needed), x)
            if self._state is not None:
                self._state.close(_bound(inp.frontier, clocks[0], w.epoch, self._lateness), send)
                _advance(held, inp.frontier.elements() if self._state.holds_rows() else [])
            sent.passed(inp.frontier.elements())

        b.build(logic, notify=True)
        return result


def _columns(column: Any) -> list[str]:
    if isinstance(column, str):
        return [column]
    return [c for c in column if isinstance(c, str)] if isinstance(column, (list, tuple)) else []


def _join(a: Any, b: Any) -> Any:
    """The least time at or after both ``a`` and ``b`` (the later one, for totally
    ordered times; coordinate-wise for :class:`~timely_spark.progress.Product`)."""
    if type(a) is Product:
        return Product(_join(a[0], b[0]), _join(a[1], b[1]))
    return a if less_equal(b, a) else b


def _capability(held: CapabilitySet, time: Any) -> Any:
    """A capability for ``time`` from ``held`` (for the least time at or after both
    ``time`` and a held one, if none is at or before ``time``)."""
    for c in held:
        if less_equal(c.time, time):
            return c.delayed(time)
    least = held.first()
    if least is None:
        raise CapabilityError(f"a window operator holds no capability to send a window at {time!r}")
    return least.delayed(_join(least.time, time))


def _advance(held: CapabilitySet, frontier: Sequence[Any]) -> None:
    """Move ``held`` to the joins of its times with the input ``frontier``'s
    elements, so that it never holds a time the input can no longer deliver; drop it
    all for an empty ``frontier`` (the caller passes one when no window is open)."""
    if not frontier:
        held.clear()
        return
    targets = {_join(c.time, f) for c in held for f in frontier}
    if targets != {c.time for c in held}:
        held.downgrade(sorted(targets, key=sort_key))


def _check_limits(x: np.ndarray, lo: int, hi: int, batch: Any, column: str, time: Any, operator: str) -> None:
    """A WindowError naming the first row of ``batch`` whose event time ``x`` is outside
    ``[lo, hi]``: its windows' bounds would not fit an int64 of the column's unit."""
    if x.min() >= lo and x.max() <= hi:
        return
    i = int(np.flatnonzero((x < lo) | (x > hi))[0])
    raise WindowError(f"operator {operator!r}: row {i} at time {time!r} ({batch.slice(i, 1).to_pylist()[0]}) has "
                      f"event time {int(x[i])} in column {column!r} (as int64), outside [{lo}, {hi}]: its windows "
                      f"would start or end beyond an int64")


def _proof_times(ends: np.ndarray, epoch: int, lateness: int, session: bool) -> np.ndarray:
    """Per window end (column units), the least int logical time ``t`` whose frontier
    ``{t}`` proves the window complete, for ``epoch_start(t) = t * epoch``: ``end <= t *
    epoch - lateness`` (tumbling, sliding), ``end < t * epoch - lateness`` (session)."""
    shifted = ends.astype(np.int64)
    if lateness and int(shifted.max()) > np.iinfo(np.int64).max - lateness:     # past int64: Python ints
        shifted = shifted.astype(object)
    shifted = shifted + lateness
    return shifted // epoch + 1 if session else -((-shifted) // epoch)


def _bound(frontier: Any, clock: Clock, epoch: Any, lateness: int) -> float:
    """The least event time a row can still arrive with, given the input frontier."""
    if frontier.is_empty():
        return math.inf
    if epoch is None:
        return -math.inf
    return min(epoch_start(clock, epoch, t) for t in frontier.elements()) - lateness


def group_by_window(stream: "Stream", time_column: str, every: Optional[Duration] = None,
                    period: Optional[Duration] = None, gap: Optional[Duration] = None,
                    keys: Union[str, Sequence[str]] = (), allowed_lateness: Duration = 0,
                    epoch: Union[None, Duration, Callable[[Any], Any]] = None, late: str = "drop",
                    name: str = "GroupByWindow") -> Windowed:
    """Group a stream of record batches by event-time windows of ``time_column`` (a
    timestamp or integer column) and ``keys``; then :meth:`Windowed.aggregate`.

    ``every`` alone: tumbling windows ``[k*every, (k+1)*every)``; with ``period``
    (``>= every``): sliding windows ``[k*every, k*every + period)``; ``gap`` instead:
    session windows per key.  Durations are ``datetime.timedelta`` s or ints in the
    column's unit.  ``epoch`` and ``allowed_lateness`` turn the input frontier into an
    event-time bound (the module's documentation says exactly how); without ``epoch``
    windows close when the input ends (and ``allowed_lateness`` is a ParameterError).
    A sliding window puts each row in ``ceil(period / every)`` windows, at most
    :data:`~timely_spark.dataflow.operators.window_spec.MAX_WINDOWS_PER_ROW` (10,000;
    more is a ParameterError).  A row whose windows would start or end beyond an int64
    of the column's unit is a WindowError naming it.
    ``epoch`` as a duration needs int logical times; inside ``iterative`` (``Product``
    times) pass a function of the logical time, or no epoch.  ``late``: ``"drop"`` (counted) or ``"output"``
    (:attr:`Windowed.late`).  Bad parameters raise ParameterError naming them; a time
    column of another type, or with nulls, a WindowError naming it.

    Streaming, with logical times that are event-time buckets of 10 (case (a)): each
    window is sent as soon as the frontier passes its end.

    >>> import pyarrow as pa, timely_spark as ts
    >>> def work(w):
    ...     sent = []
    ...     def build(s):
    ...         inp, rows = s.new_input()
    ...         windows = rows.group_by_window("t", every=20, keys="k", epoch=10)
    ...         windows.aggregate([([], "count_all")]).inspect(lambda rb: sent.extend(rb.to_pylist()))
    ...         return inp
    ...     inp = w.dataflow(build)
    ...     for bucket in range(4):
    ...         inp.send_batch(pa.table({"t": [bucket * 10 + 1, bucket * 10 + 2], "k": ["a", "b"]}))
    ...         inp.advance_to(bucket + 1); w.step(); w.step()
    ...         print(bucket, [(r["window_start"], r["k"], r["count_all"]) for r in sent]); sent.clear()
    ...     inp.close()
    >>> _ = ts.execute(work)
    0 []
    1 [(0, 'a', 2), (0, 'b', 2)]
    2 []
    3 [(20, 'a', 2), (20, 'b', 2)]
    """
    spec = window_spec(time_column, every, period, gap, allowed_lateness, epoch, late, name)
    least = stream.scope.minimum
    if spec.epoch is not None and not callable(spec.epoch) and not isinstance(least, int):
        raise ParameterError(f"operator {name!r}: epoch={spec.epoch!r} multiplies int logical times, but this "
                             f"scope's times are {least!r}-like (inside iterative?): pass epoch=a function of the "
                             f"logical time", "epoch")
    key_names = [keys] if isinstance(keys, str) else list(keys)
    if not all(isinstance(k, str) for k in key_names):
        raise BuildError(f"operator {name!r}: keys must be a column name or a list of them, got {keys!r}")
    return Windowed(stream, spec, key_names, name)
