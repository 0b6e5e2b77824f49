"""valid_during: a temporal filter -- rows in a collection only between two times of their own.

Materialize's ``mz_now()`` filters and Feldera's ``NOW()``: a row of the changelog
carries the logical times it is valid from (``start``) and until (``end``, exclusive).
A change ``d`` at time ``t`` becomes ``+d`` at ``max(t, start)`` and ``-d`` at
``max(t, end)``: the engine itself withdraws the row when the frontier reaches its end,
so a "last 24 hours" view is ``valid_during`` on event times shifted by 24 hours.  Both
are sent at once, at later times, from the capability of ``t`` (:class:`.per_time.Emit`).
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
from .per_time import Emit, per_time

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["valid_during"]


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
    withdrawn at ``max(t, end)`` -- at once, as data at those later times, so no state is
    kept.  Times must be int epochs (BuildError otherwise); ``start``/``end`` must be
    integer columns (ChangelogError naming the operator, time and column otherwise).

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

    def logic(time: Any, batches: list) -> Any:
        for batch in batches:
            check_columns(batch, [start, end], name)
        table = tables_of(with_int64_diffs(batches, name), name, time)
        d = diffs(table, name)
        begin = np.maximum(_times(table, start, name, time, time), time)
        never = np.iinfo(np.int64).max
        finish = np.maximum(_times(table, end, name, time, never), time)
        live = finish > begin
        out: dict = {}
        for at, sign, bounded in ((begin, 1, live), (finish, -1, live & (finish != never))):
            for when in np.unique(at[bounded]).tolist():
                mask = bounded & (at == when)
                part = with_diffs(table.filter(pa.array(mask)), sign * d[mask])
                out.setdefault(int(when), []).extend(part.combine_chunks().to_batches())
        return Emit(out, ())

    return per_time(stream, logic, name=name)
