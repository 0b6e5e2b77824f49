"""arrange: one keyed index of a changelog, shared by the operators that read it.

``stream.arrange(keys)`` exchanges a changelog by ``keys`` and keeps its changes in one
:class:`~..trace.Trace` per worker (differential dataflow's *arrangement*): sorted
batches of ``(row, time, diff)`` found by key, merged as they grow.  It returns an
:class:`Arranged`, which the running :func:`~.join.join` (on either side, any join type)
and :func:`~.reduce.reduce` take instead of a stream: they read the shared trace instead
of keeping a copy of the collection each, so a dataflow that joins a collection twice
and reduces it once holds it once.

How a reader stays exact with an index another operator fills: the arrange operator
adds a time's changes to the trace when the time is complete at its input, so by the
time a reader sees time ``t`` the trace holds every change at times ``<= t`` (and maybe
some later ones, which the reader leaves out: it reads the trace *as of* ``t``).  A
running join then emits at ``t`` ``dl * R(<=t) + L(<=t) * dr - dl * dr`` (``dl``,
``dr``: the changes at ``t``; ``L``, ``R``: the two collections), which is the change of
the join at ``t``.  The trace is compacted only up to what every reader has finished:
each reports its frontier, and the trace is advanced to the earliest of them.  Times
must be totally ordered (int epochs); inside ``iterative`` an arrangement is refused
with a :class:`~timely_spark.errors.BuildError`.  Snapshots keep the trace once, with
the arrange operator, keyed by the key columns' hash (it re-shards).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

import pyarrow as pa

from ...errors import BuildError
from ..lattice import coordinates
from ..trace import Trace
from .arrangement import load_arrangements, save_arrangements
from .batches import tables_of
from .changelog import DIFF, consolidate_table, require_total_order, with_int64_diffs
from .exchange_by import ExchangeBy, check_columns, key_list
from .join import RunningJoin, join
from .op_state import KEY_HASH, StateHooks
from .per_time import per_time
from .reduce import reduce

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["Arranged", "arrange", "SharedJoin"]


class Arranged:
    """A changelog arranged by ``keys``: ``stream`` (its consolidated changes, each row on
    the worker its keys hash to) and ``trace`` (this worker's changes, by key, shared by
    every operator that reads the arrangement).  Made by :func:`arrange`."""

    def __init__(self, stream: "Stream", keys: list[str], trace: Trace, name: str) -> None:
        self.stream = stream
        self.keys = keys
        self.trace = trace
        self.name = name
        self.readers: list = []                    # the operators' logics that read the trace
        self.frontiers: list = []                  # per reader: the frontier it reported last (None: not yet)

    @property
    def scope(self) -> Any:
        """The scope of the arranged stream."""
        return self.stream.scope

    @property
    def rows(self) -> int:
        """How many entries this worker's trace holds (once for all its readers)."""
        return self.trace.rows

    def reader(self, logic: Any) -> int:
        """Register ``logic``, an operator's logic that reads the trace (its ``stores``: the
        state it keeps of its own); its number for :meth:`advance`."""
        self.readers.append(logic)
        self.frontiers.append(None)
        return len(self.frontiers) - 1

    def advance(self, reader: int, frontier: Sequence[Any]) -> None:
        """``reader`` will not read the trace at times before ``frontier`` again: compact it
        to the earliest frontier of all readers (not before each has reported one)."""
        self.frontiers[reader] = list(frontier)
        if any(f is None for f in self.frontiers):
            return
        times = [t for f in self.frontiers for t in f]
        if times:
            self.trace.advance([min(times, key=coordinates)])

    def shared_by(self, keys: list[str], operator: str) -> "Arranged":
        """This arrangement, for an operator that reads it by ``keys``; a BuildError naming
        ``operator`` if it is arranged by other keys."""
        if self.keys != list(keys):
            raise BuildError(f"operator {operator!r}: the arrangement {self.name!r} is by {self.keys}, "
                             f"not by the keys {list(keys)}")
        return self

    def shared_join(self, left: Union["Arranged", "Stream"], right: Union["Arranged", "Stream"], keys: list[str],
                    how: str, name: str) -> tuple["SharedJoin", "Stream", "Stream"]:
        """The logic of a running join of ``left`` and ``right`` (one of them this
        arrangement; a stream side is arranged first) and the two streams of changes it reads."""
        left, right = _arranged(left, keys, name), _arranged(right, keys, name)
        return SharedJoin(left, right, how, name), left.stream, right.stream

    def join(self, other: Union["Arranged", "Stream"], join_type: str = "inner", name: str = "Join") -> "Stream":
        """The running join of this arrangement with ``other`` (an arrangement by the same
        keys, or a changelog stream, arranged here) on the keys: see :func:`~.join.join`
        with ``running=True``.

        >>> import pyarrow as pa, timely_spark as ts
        >>> users = pa.table({"id": [1, 2], "name": ["ann", "bob"]})
        >>> clicks = pa.table({"id": [1, 1, 3], "page": ["home", "cart", "help"]})
        >>> def build(s):
        ...     people = s.to_stream(users).arrange("id")
        ...     people.join(s.to_stream(clicks)).inspect(lambda b: print(sorted(b.to_pylist(), key=str)))
        ...     people.join(s.to_stream(clicks), "anti").inspect(lambda b: print(b.to_pylist()))
        >>> _ = ts.example(build)
        [{'id': 1, 'name': 'ann', 'page': 'cart', 'diff': 1}, {'id': 1, 'name': 'ann', 'page': 'home', 'diff': 1}]
        [{'id': 2, 'name': 'bob', 'diff': 1}]
        """
        return join(self, other, self.keys, join_type, name, running=True)

    def reduce(self, fn: Any, schema: Optional[pa.Schema] = None, name: str = "Reduce") -> "Stream":
        """The changelog of ``fn`` applied to each key's rows of this arrangement: see
        :func:`~.reduce.reduce`.

        >>> import pyarrow as pa, timely_spark as ts
        >>> log = pa.table({"k": ["a", "a", "b"], "v": [1, 2, 3]})
        >>> def total(rows, keys):
        ...     return rows.group_by(keys).aggregate([("v", "sum")]).rename_columns(keys + ["v"])
        >>> _ = ts.example(lambda s: s.to_stream(log).arrange("k").reduce(total)
        ...                .inspect(lambda b: print(sorted(b.to_pylist(), key=str))))
        [{'k': 'a', 'v': 3, 'diff': 1}, {'k': 'b', 'v': 3, 'diff': 1}]
        """
        return reduce(self, self.keys, fn, schema, name)

    def __repr__(self) -> str:
        return f"Arranged({self.name!r}, keys={self.keys!r})"


def arrange(stream: "Stream", keys: Union[str, Sequence[str]], name: str = "Arrange") -> Arranged:
    """This changelog arranged by ``keys``: one index of its changes per worker that
    several running joins (either side, any join type) and reductions of the same
    dataflow read instead of each keeping a copy (see the module).

    The arrangement's ``stream`` carries the changes (consolidated per time, an int64
    ``diff`` last; a row without ``diff`` counts +1), each on the worker its keys hash
    to; ``rows`` is how many entries this worker's index holds.  Times must be totally
    ordered: inside ``iterative`` this raises :class:`~timely_spark.errors.BuildError`.

    >>> import pyarrow as pa, timely_spark as ts
    >>> orders = pa.table({"user": [1, 1, 2], "amount": [5, 7, 1]})
    >>> users = pa.table({"user": [1, 2], "name": ["ann", "bob"]})
    >>> def largest(rows, keys):
    ...     return rows.group_by(keys).aggregate([("amount", "max")]).rename_columns(keys + ["amount"])
    >>> def build(s):
    ...     by_user = s.to_stream(orders).arrange("user")                # one index ...
    ...     by_user.join(s.to_stream(users)).inspect(lambda b: print(len(b.to_pylist()), "joined"))
    ...     by_user.reduce(largest).inspect(lambda b: print(sorted(b.to_pylist(), key=str)))   # ... read twice
    >>> _ = ts.example(build)
    3 joined
    [{'user': 1, 'amount': 7, 'diff': 1}, {'user': 2, 'amount': 1, 'diff': 1}]
    """
    keys = key_list(keys, name)
    require_total_order(stream.scope, name)
    trace = Trace(keys, stream.scope.minimum, name)

    def logic(time: Any, batches: list) -> list:
        for batch in batches:
            check_columns(batch, keys, name)
        delta = consolidate_table(tables_of(with_int64_diffs(batches, name), name, time), name)
        if not delta.num_rows:
            return []
        delta = trace.conform(delta, time)
        trace.insert(delta, time)
        return delta.combine_chunks().to_batches()

    kept = StateHooks(lambda t: save_arrangements([trace.store], KEY_HASH),
                      lambda table: load_arrangements([trace.store], table, KEY_HASH), keyed=True)
    changes = per_time(stream, logic, exchange=ExchangeBy(keys, name), name=name, state=kept)
    return Arranged(changes, keys, trace, name)


def _arranged(source: Union[Arranged, "Stream"], keys: list[str], operator: str) -> Arranged:
    """``source`` if it is an arrangement by ``keys`` (else a BuildError naming
    ``operator``), or the stream arranged by them."""
    if isinstance(source, Arranged):
        return source.shared_by(keys, operator)
    return arrange(source, keys, f"{operator}Arrange")


def as_of(trace: Trace, delta: Optional[pa.Table], time: Any) -> Optional[pa.Table]:
    """The trace's entries of the keys of ``delta`` at times ``<= time``, as row columns and
    ``diff`` (not summed); ``None`` if there are none."""
    if delta is None:
        return None
    entries = trace.gather(delta)
    if entries is None or not entries.num_rows:
        return None
    return trace.upto(entries, time)


def negated(table: pa.Table) -> pa.Table:
    """``table`` with its ``diff`` column negated."""
    return table.set_column(table.schema.get_field_index(DIFF), DIFF, pa.array(-table[DIFF].to_numpy(), pa.int64()))


def concat_changes(parts: list) -> Optional[pa.Table]:
    """The non-empty tables of ``parts`` as one; ``None`` if none."""
    parts = [p for p in parts if p is not None and p.num_rows]
    if not parts:
        return None
    return pa.concat_tables(parts, promote_options="default") if len(parts) > 1 else parts[0]


class SharedJoin(RunningJoin):
    """A running join whose two sides are arrangements: the same logic as
    :class:`~.join.RunningJoin` (outer, semi and anti parts included) over the shared
    traces, which the arrange operators fill; it keeps only what it emitted for the
    unmatched rows."""

    def __init__(self, left: Arranged, right: Arranged, how: str, name: str) -> None:
        super().__init__(left.keys, how, name, left.scope.minimum)
        self.sides = [left.trace, right.trace]
        self.arranged = [(left, left.reader(self)), (right, right.reader(self))]

    @property
    def stores(self) -> list:
        """The arrangements a snapshot keeps: the kept unmatched rows (the sides are the
        arrange operators')."""
        return [r.output.store for r in self.parts.values()]

    def advance(self, frontier: list) -> None:
        """Tell both arrangements this reader's frontier; compact the unmatched rows to it."""
        for arranged, reader in self.arranged:
            arranged.advance(reader, frontier)
        for part in self.parts.values():
            part.advance(frontier)

    def insert(self, t: Any, dl: Optional[pa.Table], dr: Optional[pa.Table]) -> None:
        """Nothing: the arrange operators added the changes at ``t`` already."""

    def _matched(self, t: Any, dl: Optional[pa.Table], dr: Optional[pa.Table]) -> dict:
        """``dl * R(<=t) + (L(<=t) - dl) * dr``, all at ``t`` (times are totally ordered)."""
        left, right = self.sides
        found = []
        if dl is not None:
            other = as_of(right, dl, t)
            if other is not None:
                found.append(self._pairs(dl, other, t))
        if dr is not None:
            before = concat_changes([as_of(left, dr, t), None if dl is None else negated(dl)])
            if before is not None:
                found.append(self._pairs(before, dr, t))
        rows = concat_changes([f[0] for f in found if f is not None])
        return {} if rows is None else {t: [rows]}

