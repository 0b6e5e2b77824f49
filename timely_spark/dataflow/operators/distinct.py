"""distinct: the set of a changelog's collection, itself as a changelog.

Rows are exchanged by :class:`.consolidate.ByRow`, so equal rows meet on one worker.  Each
worker keeps the changes it has seen in a :class:`~..trace.Trace` keyed by the whole row
and the set it emitted in a :class:`.reduction.Reduction`: per completed time it looks up
only the rows that changed, and emits ``+1`` for a row whose count went from 0 to
positive and ``-1`` for one whose count returned to 0 -- at ``Product`` times too, where
a row is re-examined at the lattice joins of its change times.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import pyarrow as pa
import pyarrow.compute as pc

from ..lattice import dimensions
from ..trace import Trace
from .arrangement import load_arrangements, save_arrangements
from .batches import tables_of
from .changelog import DIFF, consolidate_table, row_columns, with_int64_diffs
from .consolidate import ByRow
from .op_state import KEY_HASH, StateHooks
from .per_time import per_time
from .reduction import Reduction, emitted

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["distinct"]


def distinct(stream: "Stream", name: str = "Distinct") -> "Stream":
    """The changelog of the set of rows in this changelog's collection: ``+1`` when a
    row's count goes from 0 to positive, ``-1`` when it returns to 0, nothing otherwise.

    Contract: rows are all columns but ``diff`` (a batch without ``diff`` counts +1
    per row); output at each completed time, one batch per worker, with ``diff``
    last.  Cost per time: in proportion to the rows that changed (their counts are
    found in a trace, not by a scan).  A withdrawal that drives a row's count below 0
    raises :class:`~timely_spark.errors.ChangelogError` naming the operator, the time
    and the row.  Exact at ``Product`` times too (inside ``iterate``/``iterative``).
    Snapshots keep the changes and the set, keyed by the row's hash (they re-shard).

    >>> import pyarrow as pa, timely_spark as ts
    >>> def work(w):
    ...     out = []
    ...     def build(s):
    ...         inp, log = s.new_input()
    ...         log.distinct().inspect_time(lambda t, b: out.append((t, b.to_pylist())))
    ...         return inp
    ...     inp = w.dataflow(build)
    ...     inp.send_batch(pa.table({"x": ["a", "a"], "diff": [1, 1]})); inp.advance_to(1)
    ...     inp.send_batch(pa.table({"x": ["a"], "diff": [-1]})); inp.advance_to(2)
    ...     inp.send_batch(pa.table({"x": ["a"], "diff": [-1]})); inp.close()
    ...     while w.step(): pass
    ...     return out
    >>> ts.execute(work)[0]                    # time 1 changes the count, not the set
    [(0, [{'x': 'a', 'diff': 1}]), (2, [{'x': 'a', 'diff': -1}])]
    """
    state = _Distinct(name, stream.scope.minimum)
    return per_time(stream, state, exchange=ByRow(name), name=name, advance=state.advance,
                    state=StateHooks(state.save, state.restore, keyed=True))


def _present(folded: list, time: Any) -> pa.Table:
    rows = folded[0]
    return rows.filter(pc.greater(rows[DIFF], 0)).drop_columns([DIFF])


class _Distinct:
    """The traces of :func:`distinct`, made when the first batch shows the row's columns."""

    def __init__(self, name: str, like: Any) -> None:
        self.name, self.like = name, like
        dimensions(like)                          # times without lattice coordinates fail at build
        self.input: Optional[Trace] = None
        self.reduction: Optional[Reduction] = None
        self.frontier: list = []

    def _make(self, columns: list[str]) -> None:
        self.input = Trace(columns, self.like, self.name)
        self.reduction = Reduction(columns, self.like, self.name, _present)

    def __call__(self, time: Any, batches: list) -> Any:
        delta = None
        if batches:
            delta = consolidate_table(tables_of(with_int64_diffs(batches, self.name), self.name, time), self.name)
            if self.input is None:
                self._make(row_columns(delta.schema))
        if self.input is None or self.reduction is None:
            return None
        if delta is not None:
            delta = self.input.conform(delta, time)              # the columns in the state's order
            self.input.insert(delta, time)
        out, wake = self.reduction.step(time, [self.input], delta)
        return emitted(time, out, wake)

    def advance(self, frontier: list) -> None:
        """Compact both traces to ``frontier``."""
        if self.input is not None and self.reduction is not None:
            self.input.advance(frontier)
            self.reduction.advance(frontier)

    def save(self, t: Any) -> pa.Table:
        """Both traces, keyed by the row's hash."""
        stores = [] if self.input is None or self.reduction is None else [self.input.store,
                                                                          self.reduction.output.store]
        return save_arrangements(stores, KEY_HASH)

    def restore(self, table: pa.Table) -> None:
        """Rebuild both traces from :meth:`save`'s tables (of one or more workers)."""
        times = set(Trace([], self.like).time_columns) | {DIFF}
        columns = [n[2:] for n in table.column_names if n.startswith("0:") and n[2:] not in times]
        if columns:
            self._make(columns)
            assert self.input is not None and self.reduction is not None
            load_arrangements([self.input.store, self.reduction.output.store], table, KEY_HASH)
