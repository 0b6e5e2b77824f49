"""valid_during: a temporal filter -- rows in a collection only between two times of their own.

Materialize's ``mz_now()`` filters and Feldera's ``NOW()``: a row of the changelog
carries the logical times it is valid from (``start``) and until (``end``, exclusive).
A change ``d`` at time ``t`` becomes ``+d`` at ``max(t, start)`` and ``-d`` at
``max(t, end)``: the engine itself withdraws the row when the frontier reaches its end,
so a "last 24 hours" view is ``valid_during`` on event times shifted by 24 hours.  A
change for a later time is held until that time is complete (woken then:
:class:`.per_time.Emit`), and snapshots keep what is held (it came at an earlier time,
so a restored run would not make it again).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import BuildError, ChangelogError
from ...progress import kind_of
from .batches import tables_of
from .changelog import diffs, with_diffs, with_int64_diffs
from .exchange_by import check_columns
from .op_state import KEY_HASH, StateHooks, before
from .per_time import Emit, per_time

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["valid_during"]

_WHEN, _AT, _ROWS = "when", "came_at", "rows"    # a saved entry: held rows, the time they are for and came at


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _times(table: pa.Table, column: str, name: str, time: Any, missing: int) -> np.ndarray:
    values = table[column]
    if not pa.types.is_integer(values.type):
        raise ChangelogError(f"operator {name!r} at time {time!r}: column {column!r} must hold integer logical "
                             f"times (the scope's epochs), not {values.type}")
    return pc.fill_null(values.cast(pa.int64()), missing).to_numpy()


def valid_during(stream: "Stream", start: str, end: str, name: str = "ValidDuring") -> "Stream":
    """This changelog with each row present only from the time in its ``start`` column
    (inclusive) until the time in its ``end`` column (exclusive).

    Contract: at every time ``T`` the collection of the output is the rows of the input's
    collection at ``T`` with ``start <= T < end`` (a null ``start``: from the row's own
    time; a null ``end``: forever).  A change at ``t`` is sent at ``max(t, start)`` and
    withdrawn at ``max(t, end)`` -- held until those later times, and kept by snapshots.
    Times must be int epochs (BuildError otherwise); ``start``/``end`` must be integer
    columns (ChangelogError naming the operator, time and column otherwise).

    >>> import pyarrow as pa, timely_spark as ts
    >>> log = pa.table({"x": ["a", "b"], "start": [0, 2], "end": [3, None]})
    >>> def show(t, b):
    ...     print(t, sorted((r["x"], r["diff"]) for r in b.to_pylist()))
    >>> _ = ts.example(lambda s: s.to_stream(log).valid_during("start", "end").inspect_time(show))
    0 [('a', 1)]
    2 [('b', 1)]
    3 [('a', -1)]
    """
    like = stream.scope.minimum
    if not isinstance(like, int) or not kind_of(like).total:
        raise BuildError(f"operator {name!r}: a temporal filter needs int epochs as times, not {like!r}-like")

    held: dict = {}          # later time -> [(time the rows came at, rows with their diffs)]
    index = stream.scope.index

    def logic(time: Any, batches: list) -> Any:
        now = [rows for _, rows in held.pop(time, [])]
        wake = []
        if batches:
            for when, part in _parts(batches, time):
                if when == time:
                    now.append(part)
                else:
                    wake.append(when)
                    held.setdefault(when, []).append((time, part))
        return Emit({time: [b for part in now for b in part.to_batches()]}, wake)

    def save(t: Any) -> pa.Table:
        """The rows held for times ``>= t`` that came before ``t`` (the rest come again):
        one entry per later time and time they came at, the rows as an Arrow IPC stream
        (any schema), keyed by this worker's index (the operator does not exchange)."""
        parts = [(when, at, rows) for when, kept in held.items() for at, rows in kept if before(at, t)]
        return pa.table({_WHEN: pa.array([p[0] for p in parts], pa.int64()),
                         _AT: pa.array([p[1] for p in parts], pa.int64()),
                         _ROWS: pa.array([_ipc(p[2]) for p in parts], pa.binary()),
                         KEY_HASH: pa.array(np.full(len(parts), index), pa.uint64())})

    def restore(table: pa.Table) -> list:
        for when, at, rows in zip(*(table[c].to_pylist() for c in (_WHEN, _AT, _ROWS))):
            held.setdefault(when, []).append((at, pa.ipc.open_stream(rows).read_all()))
        return list(held)

    def _parts(batches: list, time: Any) -> list:
        """The changes at ``time`` as ``(when, rows)``: ``+d`` at ``max(time, start)``,
        ``-d`` at ``max(time, end)``."""
        for batch in batches:
            check_columns(batch, [start, end], name)
        table = tables_of(with_int64_diffs(batches, name), name, time)
        d = diffs(table, name)
        begin = np.maximum(_times(table, start, name, time, time), time)
        never = np.iinfo(np.int64).max
        finish = np.maximum(_times(table, end, name, time, never), time)
        live = finish > begin
        out = []
        for at, sign, bounded in ((begin, 1, live), (finish, -1, live & (finish != never))):
            for when in np.unique(at[bounded]).tolist():
                mask = bounded & (at == when)
                out.append((int(when), with_diffs(table.filter(pa.array(mask)), sign * d[mask]).combine_chunks()))
        return out

    return per_time(stream, logic, name=name, state=StateHooks(save, restore, keyed=True))
