"""Reduction: keys re-examined at completed times, over traces, exact at partially ordered times.

The core of every operator whose output is a function of each key's collection
(``distinct``, ``reduce``, the unmatched rows of outer joins, semi and anti joins).  At
a completed time ``t`` the keys that changed (and the keys woken at ``t``) are looked
up in the input traces *at t*; ``fn`` maps their collections to the output rows they
should have; the difference from what the output trace holds for them at ``t`` is
emitted at ``t`` and added to the output trace.

With totally ordered times that is all.  With ``Product(outer, round)`` times (inside
``iterate``/``iterative``) a key's collection also changes at times no input change is
at: a change at ``(1, 0)`` and one at ``(0, 3)`` make a collection at ``(1, 3)`` that
neither time shows.  So, as differential dataflow's reduce does, a key examined at
``t`` is woken again at the lattice join of ``t`` with every time its inputs' traces
hold for it (its "interesting times"); each of those is examined when complete, and
wakes the key at joins with later times in turn -- the join-closure of its change
times, where the output may have to change.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

import numpy as np
import pyarrow as pa

from ..lattice import coordinates, times_of_array
from ..trace import Trace
from .changelog import DIFF, consolidate_table, with_diffs
from .key_hash import hash_columns
from .per_time import Emit

__all__ = ["Reduction", "emitted"]

#: ``fn(collections, time) -> rows``: per input, the folded collection (rows with their
#: counts in ``diff``) of the keys examined; the output rows of those keys (a ``diff``
#: column, if any, is each row's count; none means once each).
Folded = Callable[[list, Any], Optional[pa.Table]]


def emitted(time: Any, out: Optional[pa.Table], wake: list, later: Optional[dict] = None) -> Any:
    """What a ``per_time`` logic returns for output ``out`` at ``time``, times to ``wake``
    at and batches ``later`` at other times: plain batches when there is nothing but ``out``.

    >>> import pyarrow as pa
    >>> emitted(0, pa.table({"x": [1]}), [])[0].num_rows, emitted(0, None, [2]).wake
    (1, [2])
    """
    batches = [] if out is None else out.combine_chunks().to_batches()
    if not wake and not later:
        return batches
    at = dict(later or {})
    at[time] = at.get(time, []) + batches
    return Emit(at, wake)


class Reduction:
    """The output trace and the woken keys of one reduction (see the module).

    >>> import pyarrow as pa
    >>> inp = Trace(["k"], 0)
    >>> count = Reduction(["k"], 0, "Count",
    ...     lambda folded, t: folded[0].group_by(["k"]).aggregate([("diff", "sum")]).rename_columns(["k", "n"]))
    >>> inp.insert(pa.table({"k": ["a", "a"], "diff": [1, 1]}), 0)
    >>> count.step(0, [inp], pa.table({"k": ["a"]}))[0].to_pylist()
    [{'k': 'a', 'n': 2, 'diff': 1}]
    >>> inp.insert(pa.table({"k": ["a"], "diff": [-1]}), 1)
    >>> sorted(count.step(1, [inp], pa.table({"k": ["a"]}))[0].to_pylist(), key=str)
    [{'k': 'a', 'n': 1, 'diff': 1}, {'k': 'a', 'n': 2, 'diff': -1}]
    """

    def __init__(self, keys: list[str], like: Any, name: str, fn: Folded) -> None:
        self.keys, self.like, self.name, self.fn = keys, like, name, fn
        self.output = Trace(keys, like, name)
        self.woken: dict = {}                         # time -> [key hashes to examine then]
        self.total = len(coordinates(like)) == 1

    def step(self, time: Any, inputs: Sequence[Trace], changed: Union[None, pa.Table, np.ndarray],
             check: bool = True) -> tuple[Optional[pa.Table], list]:
        """Examine at the completed ``time`` the keys of ``changed`` (whose changes at
        ``time`` are already in ``inputs``: a table with the key columns, or the keys'
        hashes) and those woken at ``time``: the output changes at ``time`` (or ``None``)
        and the later times to wake at.  ``check``: a negative count in an input raises
        ChangelogError naming the operator, time and row.  Keys are found by their
        hashes: a key that shares one with a changed key is examined too, which changes
        nothing (its output is already that of its collection)."""
        parts = self.woken.pop(time, [])
        if changed is not None:
            parts.append(changed if isinstance(changed, np.ndarray) else hash_columns(changed, self.keys))
        wanted = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.uint64)
        if not len(wanted):
            return None, []
        found = [trace.find(wanted) for trace in inputs]
        folded = [self._empty(trace) if e is None else trace.fold(e, time, check)
                  for trace, (e, _) in zip(inputs, found)]
        new = self.fn(folded, time)
        parts = []
        if new is not None and new.num_rows:
            parts.append(new if DIFF in new.column_names else with_diffs(new, np.ones(new.num_rows, np.int64)))
        emitted_before, _ = self.output.find(wanted)
        if emitted_before is not None and emitted_before.num_rows:     # summed with the new rows below
            old = self.output.upto(emitted_before, time)
            parts.append(old.set_column(old.schema.get_field_index(DIFF), DIFF,
                                        pa.array(-old[DIFF].to_numpy(), pa.int64())))
        out = consolidate_table(pa.concat_tables(parts, promote_options="default"), self.name) if parts else None
        if out is not None and out.num_rows:
            self.output.insert(out, time)
        else:
            out = None
        return out, ([] if self.total else self._wake(time, found, inputs))

    def _empty(self, trace: Trace) -> pa.Table:
        schema = trace.schema
        if schema is None:
            return pa.table({k: pa.array([], pa.null()) for k in self.keys}).append_column(
                DIFF, pa.array([], pa.int64()))
        return schema.empty_table().drop_columns(trace.time_columns)

    def _wake(self, time: Any, found: list, inputs: Sequence[Trace]) -> list:
        """Wake the keys of the entries ``found`` (with their key hashes) at the joins of
        ``time`` with their times."""
        here = np.array(coordinates(time), np.int64)
        later: dict = {}
        for trace, (e, hashes) in zip(inputs, found):
            if e is None or not e.num_rows:
                continue
            joined = np.maximum(trace.times(e), here)
            beyond = np.any(joined != here, axis=1)
            if not beyond.any():
                continue
            joined, hashes = joined[beyond], hashes[beyond]
            distinct, which = np.unique(joined, axis=0, return_inverse=True)
            which = which.reshape(-1)
            for i, when in enumerate(times_of_array(distinct, self.like)):
                later.setdefault(when, []).append(hashes[which == i])
        for when, arrays in later.items():
            self.woken.setdefault(when, []).extend(arrays)
        return list(later)

    def advance(self, frontier: list) -> None:
        """Compact the output trace to ``frontier`` (see :meth:`.Trace.advance`)."""
        self.output.advance(frontier)
