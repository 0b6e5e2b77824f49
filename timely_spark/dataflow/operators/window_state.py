"""The open windows of ``group_by_window`` on one worker, and how they close.

* :class:`Panes` -- tumbling and sliding windows.  Rows are kept once, in *panes* of
  ``gcd(every, period)`` event time (a tumbling window is one pane, a 5-minute window
  sliding by 1 minute is five); a window ``[s, s + period)`` closes once the event-time
  bound reaches ``s + period``, and a pane is released once the last window holding
  it has closed.
* :class:`Sessions` -- session windows per key: rows within ``gap`` of each other
  (Spark's rule: the next row at most ``gap`` after the last) form one session
  ``[first, last + gap)``, which closes once the bound passes its end.

Both remember the logical times of their rows (no capabilities: the operator holds
those, at its input frontier).  ``close(bound, send)`` calls ``send(time, table)``,
``time`` the earliest logical time among the rows of the windows in ``table``, with
columns ``window_start, window_end, keys, aggregates`` (window bounds as int64 of the
column's unit; the operator casts them); all per-row work is Arrow's or numpy's.

Snapshots (:meth:`Panes.save`, :meth:`Sessions.save`): the rows that came at logical
times before the snapshot time ``t`` (each row remembers its logical time: a per-pane
index in ``__tid``, a per-operator one for sessions), with their logical times, pane
or event time and key hash; not the rows that came at ``t`` or later (the restored run
sends them again).  :meth:`Panes.load` / :meth:`Sessions.load` rebuild them and return
the restored rows' logical times (the operator makes capabilities for them).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import AggregateOverflow
from ...progress import less_equal, sort_key
from .agg_spec import aggregate_table
from .group_by import tables_of
from .key_hash import hash_columns
from .op_state import KEY_HASH, before, pickled_times, time_codes
from .window_spec import INT64_MAX, INT64_MIN

__all__ = ["Panes", "Sessions", "Sent"]

#: ``group_by_window``: a pane of open windows combines its record batches into one once
#: it holds this many (Arrow aggregates a few large chunks much faster than many small).
WINDOW_PANE_BATCHES = 32

_WS, _WE = "window_start", "window_end"
_TID, _TIME, _PANE, _BOUND, _X = "__tid", "__time", "__pane", "__bound", "__x"


def _keyed(table: pa.Table, keys: list[str]) -> pa.Table:
    """``table`` with the hash its exchange routed it by: the keys' hash, or 0 (all rows
    went to worker 0) without keys."""
    h = hash_columns(table, keys) if keys and table.num_rows else np.zeros(table.num_rows, np.uint64)
    return table.append_column(KEY_HASH, pa.array(h, pa.uint64()))


def _earlier(table: pa.Table, times: list, t: Any) -> tuple[pa.Table, list]:
    """The rows of ``table`` whose time (``times[__tid]``) is before ``t``, their
    ``__tid`` replaced by the pickled time in ``__time``."""
    keep = np.array([before(time, t) for time in times], bool)
    codes = table.column(_TID).to_numpy()
    rows = table.filter(pa.array(keep[codes])) if not keep.all() else table
    kept_codes = rows.column(_TID).to_numpy()
    return rows.drop_columns([_TID]).append_column(_TIME, pickled_times(kept_codes, times)), times


def _split_by(values: np.ndarray, batch: Any) -> list[tuple[int, Any]]:
    """``batch`` cut into one slice per distinct value of ``values`` (one per row)."""
    first, last = values.min(), values.max()
    if first == last:
        return [(int(first), batch)]
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    cuts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    taken = batch.take(pa.array(order))
    bounds = np.concatenate([[0], cuts, [len(values)]])
    return [(int(ordered[a]), taken.slice(a, b - a)) for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]


class Panes:
    """Tumbling and sliding windows (``every``, ``period`` in the column's unit)."""

    def __init__(self, keys: list[str], spec: list, every: int, period: int, operator: str) -> None:
        self.keys, self.spec, self.every, self.period, self.operator = keys, spec, every, period, operator
        self.pane = math.gcd(every, period)
        # pane start -> [None (unused), [batches], {logical time: its __tid}]
        self.panes: dict[int, list] = {}
        self.bound: float = -math.inf           # the event-time bound of the last close

    def add(self, time: Any, batch: Any, x: np.ndarray) -> None:
        """Keep the rows of ``batch`` (event times ``x``), received at logical ``time``."""
        for start, part in _split_by(x - x % self.pane, batch):
            entry = self.panes.get(start)
            if entry is None:
                entry = self.panes[start] = [None, [], {}]
            tid = entry[2].get(time)
            if tid is None:
                tid = entry[2][time] = len(entry[2])
            entry[1].append(part.append_column(_TID, pa.array(np.full(part.num_rows, tid, np.int32))))
            if len(entry[1]) >= WINDOW_PANE_BATCHES:     # few large chunks aggregate much faster than many small
                entry[1] = tables_of(entry[1], self.operator, time).combine_chunks().to_batches()

    def save(self, t: Any) -> pa.Table:
        """The rows that came before ``t``, keyed, with ``__pane``, ``__time`` and ``__bound``."""
        parts = []
        for start, (_, batches, tids) in self.panes.items():
            table, _ = _earlier(tables_of(batches, self.operator, t), list(tids), t)
            parts.append(table.append_column(_PANE, pa.array(np.full(table.num_rows, start, np.int64))))
        if not parts:
            return pa.table({KEY_HASH: pa.array([], pa.uint64())})
        table = pa.concat_tables(parts).combine_chunks()
        table = table.append_column(_BOUND, pa.array(np.full(table.num_rows, self.bound, np.float64)))
        return _keyed(table, self.keys)

    def load(self, table: pa.Table) -> list:
        """Take back :meth:`save`'s rows (of one or more workers); their logical times."""
        if not table.num_rows:
            return []
        restored: set = set()
        self.bound = float(pc.max(table.column(_BOUND)).as_py())
        panes = table.column(_PANE).to_numpy()
        rows = table.drop_columns([_PANE, _BOUND, KEY_HASH])
        for start, part in _split_by(panes, rows):
            times, codes = time_codes(part.column(_TIME))
            entry = self.panes[start] = [None, [], {}]
            for i, time in enumerate(times):
                entry[2][time] = i
            restored.update(times)
            entry[1].extend(part.drop_columns([_TIME]).append_column(_TID, pa.array(codes, pa.int32()))
                            .combine_chunks().to_batches())
        return list(restored)

    def limits(self) -> tuple[int, int]:
        """The least and the greatest event time whose windows' bounds all fit an int64:
        the earliest window of ``x`` starts at the least multiple of ``every`` above ``x -
        period``, the latest ends at ``floor(x / every) * every + period``."""
        every, period = self.every, self.period
        return (-(INT64_MIN // -every) - 1) * every + period, ((INT64_MAX - period) // every + 1) * every - 1

    def _starts(self, pane: int) -> range:
        """The starts of the windows that hold ``pane``, latest first."""
        last = pane - pane % self.every
        return range(last, pane - self.period, -self.every)

    def holds_rows(self) -> bool:
        """Whether any window is open (rows are kept)."""
        return bool(self.panes)

    def open_windows(self) -> int:
        """How many windows hold rows and have not closed."""
        return len({s for p in self.panes for s in self._starts(p) if s + self.period > self.bound})

    def close(self, bound: float, send: Callable[[Any, pa.Table], None]) -> None:
        """``send(time, table)`` the windows that ``bound`` closes (``end <=
        bound``), aggregated (``time``: the earliest logical time of their rows); then
        release the panes no open window holds."""
        before = self.bound                           # windows ending by `before` were sent already
        if bound <= before:                           # (a restored operator sees its frontier start over)
            return
        self.bound = bound
        period = self.period
        if not self.panes or min(self._starts(min(self.panes))) + period > bound:
            return
        starts = sorted({s for p in self.panes for s in self._starts(p) if before < s + period <= bound})
        by_time: dict[Any, list] = {}            # earliest logical time -> [time, [(start, batches)]]
        held = np.array(sorted(self.panes), np.int64)     # the panes with rows (not every pane slot)
        firsts = np.searchsorted(held, starts).tolist()
        lasts = np.searchsorted(held, [s + period for s in starts]).tolist()
        for s, lo, hi in zip(starts, firsts, lasts):
            entries = [self.panes[q] for q in held[lo:hi].tolist()]
            if not entries:
                continue
            first = min((t for e in entries for t in e[2]), key=sort_key)
            group = by_time.setdefault(first, [first, []])
            group[1].append((s, [b for e in entries for b in e[1]]))
        for first, windows in by_time.values():
            batches = [b for _, bs in windows for b in bs]
            table = tables_of(batches, self.operator, first)
            if len(windows) == 1:                    # the streaming case: one chunk, grouped by the keys alone
                try:
                    out = aggregate_table(table.combine_chunks(), self.keys, self.spec, self.operator, first)
                except AggregateOverflow as exc:
                    raise AggregateOverflow(f"{exc} in the window starting at {windows[0][0]}") from None
                out = out.add_column(0, _WS, pa.array(np.full(out.num_rows, windows[0][0], np.int64)))
            else:
                lengths = [sum(b.num_rows for b in bs) for _, bs in windows]
                ws = np.repeat(np.array([s for s, _ in windows], np.int64), lengths)
                table = table.append_column(_WS, pa.array(ws))
                out = aggregate_table(table, [_WS] + self.keys, self.spec, self.operator, first)
            end = pc.add(out.column(_WS), pa.scalar(period, pa.int64()))
            send(first, out.add_column(1, _WE, end))
        for p in [p for p in self.panes if max(self._starts(p)) + period <= bound]:
            del self.panes[p]


class Sessions:
    """Session windows of ``gap`` (in the column's unit) per key."""

    def __init__(self, keys: list[str], spec: list, gap: int, operator: str) -> None:
        self.keys, self.spec, self.gap, self.operator = keys, spec, gap, operator
        self.pending: list = []                  # tables of the rows of open sessions (+ __x, __tid)
        self.tids: dict[Any, int] = {}           # logical time -> time id
        self.next_tid = 0
        self.min_end: float = math.inf           # no open session ends before this

    def add(self, time: Any, batch: Any, x: np.ndarray) -> None:
        """Keep the rows of ``batch`` (event times ``x``), received at logical ``time``."""
        tid = self.tids.get(time)
        if tid is None:
            tid = self.tids[time] = self.next_tid
            self.next_tid += 1
        n = batch.num_rows
        table = pa.Table.from_batches([batch]).append_column("__x", pa.array(x)) \
            .append_column("__tid", pa.array(np.full(n, tid, np.int64)))
        self.pending.append(table)
        self.min_end = min(self.min_end, int(x.min()) + self.gap)

    def save(self, t: Any) -> pa.Table:
        """The rows that came before ``t``, keyed, with their event times and ``__time``."""
        times = [None] * self.next_tid
        for time, tid in self.tids.items():
            times[tid] = time
        table = pa.concat_tables(self.pending) if len(self.pending) > 1 else self.pending[0] if self.pending \
            else None
        if table is None:
            return pa.table({KEY_HASH: pa.array([], pa.uint64())})
        table, _ = _earlier(table, times, t)
        return _keyed(table.combine_chunks(), self.keys)

    def load(self, table: pa.Table) -> list:
        """Take back :meth:`save`'s rows (of one or more workers); their logical times."""
        if not table.num_rows:
            return []
        times, codes = time_codes(table.column(_TIME))
        for time in times:
            self.tids[time] = self.next_tid
            self.next_tid += 1
        rows = table.drop_columns([_TIME, KEY_HASH]).append_column(_TID, pa.array(codes.astype(np.int64)))
        self.pending.append(rows)
        self.min_end = min(self.min_end, float(pc.min(rows.column(_X)).as_py()) + self.gap)
        return list(times)

    def limits(self) -> tuple[int, int]:
        """The least and the greatest event time whose session bounds fit an int64 (a
        session ends ``gap`` after its last row)."""
        return INT64_MIN, INT64_MAX - self.gap

    def _sessions(self) -> tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray]:
        """The pending rows sorted by key and event time, each row's session number,
        and each session's start and end."""
        table = self.pending[0]
        if len(self.pending) > 1:
            try:
                table = pa.concat_tables(self.pending)
            except pa.ArrowInvalid as exc:
                raise ValueError(f"operator {self.operator!r}: batches have different schemas ({exc}); this "
                                 f"operator needs one schema") from exc
        order = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in self.keys] + [("__x", "ascending")])
        table = table.take(order)
        x = table.column("__x").to_numpy()
        new = np.ones(len(x), bool)
        new[1:] = (x[1:] - x[:-1]) > self.gap
        for k in self.keys:
            col = table.column(k).combine_chunks()
            a, b = col.slice(1), col.slice(0, len(col) - 1)
            same = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(a.is_null(), b.is_null()))
            new[1:] |= ~same.to_numpy(zero_copy_only=False)
        sid = np.cumsum(new) - 1
        firsts = np.flatnonzero(new)
        lasts = np.append(firsts[1:] - 1, len(x) - 1)
        return table, sid, x[firsts], x[lasts] + self.gap

    def holds_rows(self) -> bool:
        """Whether any session is open (rows are kept)."""
        return bool(self.pending)

    def open_windows(self) -> int:
        """How many sessions hold rows and have not closed."""
        return len(self._sessions()[2]) if self.pending else 0

    def close(self, bound: float, send: Callable[[Any, pa.Table], None]) -> None:
        """``send(time, table)`` the sessions whose end is before ``bound``,
        aggregated (``time``: the earliest logical time of their rows); then release
        their rows and the times no row has."""
        if not self.pending or not self.min_end < bound:
            return
        table, sid, starts, ends = self._sessions()
        closed = ends < bound
        rows = closed[sid]
        rest = table.filter(pa.array(~rows))
        self.pending = [rest] if rest.num_rows else []
        self.min_end = float(ends[~closed].min()) if (~closed).any() else math.inf
        done = table.filter(pa.array(rows)).append_column("__sid", pa.array(sid[rows]))
        # the earliest logical time of each session: time ids ranked in the time order
        order = sorted(self.tids, key=sort_key)
        rank_of = np.zeros(self.next_tid, np.int64)
        rank_of[[self.tids[t] for t in order]] = np.arange(len(order))
        done = done.set_column(done.schema.get_field_index("__tid"), "__tid",
                               pa.array(rank_of[done.column("__tid").to_numpy()]))
        out = aggregate_table(done, ["__sid"] + self.keys, self.spec + [("__tid", "min")], self.operator)
        s = out.column("__sid").to_numpy()
        first_rank = out.column("__tid_min").to_numpy()
        out = out.drop_columns(["__sid", "__tid_min"])
        out = out.add_column(0, _WS, pa.array(starts[s])).add_column(1, _WE, pa.array(ends[s]))
        for r in np.unique(first_rank).tolist():
            send(order[r], out.filter(pa.array(first_rank == r)))
        still = set(np.unique(rest.column("__tid").to_numpy()).tolist()) if rest.num_rows else set()
        for t in [t for t, tid in self.tids.items() if tid not in still]:
            del self.tids[t]


_SENT = "__sent"            # marks a saved row as a sent window's result (null: an open window's row)
_SENT_PREFIX = "__sent:"    # a saved result's own columns, apart from the open windows' columns


class Sent:
    """Window results sent at logical times the input frontier has not yet passed.

    A window closed by the frontier ``{t}`` is sent at ``t``; a snapshot at ``t`` is
    taken with the frontier at ``t``, when that window's rows are gone -- yet output at
    ``t`` belongs to the restored run.  So the results are kept until the frontier is
    past their time; :meth:`save` gives those at times ``>= t`` (keyed, their columns
    prefixed, marked by ``__sent``) and :meth:`split` takes them apart from the open
    windows' rows on restore, for the operator to send again.
    """

    def __init__(self, keys: list[str]) -> None:
        self.keys = keys
        self.kept: list = []                     # [(logical time, table sent at it)]

    def add(self, time: Any, table: pa.Table) -> None:
        """Remember ``table``, sent at ``time``."""
        self.kept.append((time, table))

    def passed(self, frontier: list) -> None:
        """Forget the results at times no element of the input ``frontier`` is at or before."""
        if self.kept:
            self.kept = [(t, tb) for t, tb in self.kept if any(less_equal(f, t) for f in frontier)]

    def save(self, t: Any, rows: pa.Table) -> pa.Table:
        """``rows`` (the open windows' saved rows) with the results sent at times ``>= t``."""
        parts = [(time, tb) for time, tb in self.kept if not before(time, t)]
        if not parts:
            return rows
        times = list(dict.fromkeys(time for time, _ in parts))
        codes = np.concatenate([np.full(tb.num_rows, times.index(time), np.int32) for time, tb in parts])
        table = pa.concat_tables([tb for _, tb in parts])
        table = _keyed(table, self.keys).rename_columns(
            [_SENT_PREFIX + n if n != KEY_HASH else n for n in table.column_names] + [KEY_HASH])
        table = table.append_column(_TIME, pickled_times(codes, times)) \
            .append_column(_SENT, pa.array(np.ones(table.num_rows, bool)))
        if not rows.num_rows:
            return table
        return pa.concat_tables([rows, table], promote_options="default")

    def split(self, table: pa.Table) -> tuple[pa.Table, list]:
        """A restored table's open-window rows, and the results to send again as
        ``[(logical time, table)]`` (remembered here too)."""
        if _SENT not in table.column_names:
            return table, []
        mask = pc.fill_null(table.column(_SENT), False)
        own = [n for n in table.column_names if n.startswith(_SENT_PREFIX)]
        rows = table.filter(pc.invert(mask)).drop_columns(own + [_SENT])
        sent = table.filter(mask)
        if not sent.num_rows:
            return rows, []
        times, codes = time_codes(sent.column(_TIME))
        sent = sent.select(own).rename_columns([n[len(_SENT_PREFIX):] for n in own])
        out = [(time, sent.filter(pa.array(codes == i))) for i, time in enumerate(times)]
        self.kept.extend(out)
        return rows, out
