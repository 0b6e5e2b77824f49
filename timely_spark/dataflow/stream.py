"""Stream: the output of an operator, and the operators that can be applied to it.

Every method builds one operator in the stream's scope and returns its output
stream(s).  Records move in batches ``(time, list)``; the functions you pass are
called once per record (``map``, ``filter``...) or once per batch (``*_batch``).
Batches are shared between consumers: never mutate a list you are given.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, Sequence

from ..progress import Source

__all__ = ["Stream"]


class Stream:
    """A stream of timestamped records in a scope.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda scope: scope.to_stream(range(5))
    ...     .map(lambda x: x * 10).filter(lambda x: x != 20).inspect(print))
    0
    10
    30
    40
    """

    __slots__ = ("scope", "_source", "_tee", "_broadcast")

    def __init__(self, scope: Any, source: Source, tee: list, broadcast: bool = False) -> None:
        self.scope = scope
        self._source = source
        self._tee = tee
        self._broadcast = broadcast

    def __repr__(self) -> str:
        return f"Stream(scope={self.scope.name!r}, source={self._source})"

    # ---- record-at-a-time -------------------------------------------------------------
    def map(self, f: Callable[[Any], Any], name: str = "Map") -> "Stream":
        """Apply ``f`` to every record.

        >>> import timely_spark as ts
        >>> _ = ts.example(lambda s: s.to_stream([1, 2]).map(str).inspect(print))
        1
        2
        """
        return _core.map(self, f, name)

    def flat_map(self, f: Callable[[Any], Iterable[Any]], name: str = "FlatMap") -> "Stream":
        """Replace every record with the records of ``f(record)``.

        >>> import timely_spark as ts
        >>> _ = ts.example(lambda s: s.to_stream([2, 3]).flat_map(range).inspect(print))
        0
        1
        0
        1
        2
        """
        return _core.flat_map(self, f, name)

    def filter(self, predicate: Callable[[Any], bool], name: str = "Filter") -> "Stream":
        """Keep the records for which ``predicate`` is true.

        >>> import timely_spark as ts
        >>> _ = ts.example(lambda s: s.to_stream(range(6)).filter(lambda x: x % 3 == 0).inspect(print))
        0
        3
        """
        return _core.filter(self, predicate, name)

    def map_batches(self, f: Callable[[list], list], name: str = "MapBatches") -> "Stream":
        """Replace every batch with ``f(batch)`` (one call per batch, not per record).

        >>> import timely_spark as ts
        >>> _ = ts.example(lambda s: s.to_stream([3, 1, 2]).map_batches(sorted).inspect(print))
        1
        2
        3
        """
        return _core.map_batches(self, f, name)

    def inspect(self, f: Callable[[Any], Any], name: str = "Inspect") -> "Stream":
        """Call ``f(record)`` for every record and pass the stream on unchanged.

        >>> import timely_spark as ts
        >>> _ = ts.example(lambda s: s.to_stream("ab").inspect(print))
        a
        b
        """
        return _core.inspect(self, f, name)

    def inspect_time(self, f: Callable[[Any, Any], Any], name: str = "InspectTime") -> "Stream":
        """Call ``f(time, record)`` for every record.

        >>> import timely_spark as ts
        >>> _ = ts.example(lambda s: s.to_stream("ab").inspect_time(lambda t, x: print(t, x)))
        0 a
        0 b
        """
        return _core.inspect_time(self, f, name)

    def inspect_batch(self, f: Callable[[Any, list], Any], name: str = "InspectBatch") -> "Stream":
        """Call ``f(time, batch)`` for every batch.

        >>> import timely_spark as ts
        >>> _ = ts.example(lambda s: s.to_stream(range(3)).inspect_batch(lambda t, xs: print(t, xs)))
        0 [0, 1, 2]
        """
        return _core.inspect_batch(self, f, name)

    # ---- routing ---------------------------------------------------------------------
    def exchange(self, key: Callable[[Any], int], name: str = "Exchange") -> "Stream":
        """Send every record to worker ``key(record) % peers``.

        >>> import timely_spark as ts
        >>> def work(w):
        ...     w.dataflow(lambda s: s.to_stream(range(4)).exchange(lambda x: x)
        ...                .inspect(lambda x: w.index == x % 2 or print("misrouted")))
        >>> ts.execute(work, threads=2)
        [None, None]
        """
        return _core.exchange(self, key, name)

    def broadcast(self, name: str = "Broadcast") -> "Stream":
        """Send every record to every worker.

        >>> import timely_spark as ts
        >>> def work(w):
        ...     seen = []
        ...     w.dataflow(lambda s: s.to_stream([w.index]).broadcast().inspect(seen.append))
        ...     w.step_while(lambda: len(seen) < 2, timeout=10)
        ...     return sorted(seen)
        >>> ts.execute(work, threads=2)
        [[0, 1], [0, 1]]
        """
        return _core.broadcast(self, name)

    def concat(self, other: "Stream", name: str = "Concat") -> "Stream":
        """Merge with ``other`` (same scope).

        >>> import timely_spark as ts
        >>> _ = ts.example(lambda s: s.to_stream([1]).concat(s.to_stream([2])).inspect(print))
        1
        2
        """
        return _core.concatenate(self.scope, [self, other], name)

    def partition(self, parts: int, route: Callable[[Any], int], name: str = "Partition") -> list["Stream"]:
        """Split into ``parts`` streams; each record goes to stream ``route(record)``.

        >>> import timely_spark as ts
        >>> def build(s):
        ...     even, odd = s.to_stream(range(5)).partition(2, lambda x: x % 2)
        ...     odd.inspect(print)
        >>> _ = ts.example(build)
        1
        3
        """
        return _split.partition(self, parts, route, name)

    def branch(self, predicate: Callable[[Any], bool], name: str = "Branch") -> tuple["Stream", "Stream"]:
        """``(false_stream, true_stream)``: records for which ``predicate`` is false, and true.

        >>> import timely_spark as ts
        >>> def build(s):
        ...     small, big = s.to_stream([1, 50, 2]).branch(lambda x: x > 10)
        ...     big.inspect(print)
        >>> _ = ts.example(build)
        50
        """
        return _split.branch(self, predicate, name)

    def branch_when(self, predicate: Callable[[Any], bool], name: str = "BranchWhen") -> tuple["Stream", "Stream"]:
        """``(false_stream, true_stream)`` by a predicate on each batch's *time*.

        >>> import timely_spark as ts
        >>> def build(s):
        ...     early, late = s.to_stream([7]).branch_when(lambda t: t >= 1)
        ...     early.inspect(print)
        >>> _ = ts.example(build)
        7
        """
        return _split.branch_when(self, predicate, name)

    def ok_err(self, f: Callable[[Any], Any], name: str = "OkErr") -> tuple["Stream", "Stream"]:
        """``(ok, err)``: ``f(record)`` where it returns, ``(record, exception)`` where it raises.

        >>> import timely_spark as ts
        >>> def build(s):
        ...     ok, err = s.to_stream(["1", "x", "3"]).ok_err(int)
        ...     ok.inspect(print)
        ...     err.inspect(lambda e: print("bad:", e[0], type(e[1]).__name__))
        >>> _ = ts.example(build)
        1
        3
        bad: x ValueError
        """
        return _split.ok_err(self, f, name)

    # ---- time -----------------------------------------------------------------------
    def delay(self, f: Callable[[Any, Any], Any], name: str = "Delay") -> "Stream":
        """Move each record to time ``f(record, time)`` (which must not be earlier);
        records leave once their new time is complete.

        >>> import timely_spark as ts
        >>> _ = ts.example(lambda s: s.to_stream([3, 1]).delay(lambda x, t: x).inspect_time(lambda t, x: print(t, x)))
        1 1
        3 3
        """
        return _delay.delay(self, f, name)

    def delay_total(self, f: Callable[[Any, Any], Any], name: str = "DelayTotal") -> "Stream":
        """``delay`` for totally ordered times (ints, tuples), with a heap instead of a
        notificator.

        >>> import timely_spark as ts
        >>> _ = ts.example(lambda s: s.to_stream([5, 2]).delay_total(lambda x, t: x).inspect_time(lambda t, x: print(t, x)))
        2 2
        5 5
        """
        return _delay.delay_total(self, f, name)

    def reclock(self, clock: "Stream", name: str = "Reclock") -> "Stream":
        """Hold records until a record appears on ``clock`` at a time ``tc`` at or after
        theirs, then release them at ``tc``.

        >>> import timely_spark as ts
        >>> def build(s):
        ...     data = s.to_stream([1, 2]).delay(lambda x, t: x)
        ...     tick = s.to_stream([5]).delay(lambda x, t: x)
        ...     data.reclock(tick).inspect_time(lambda t, x: print(t, x))
        >>> _ = ts.example(build)
        5 1
        5 2
        """
        return _delay.reclock(self, clock, name)

    # ---- aggregation -------------------------------------------------------------------
    def count(self, name: str = "Count") -> "Stream":
        """The number of records at each time on this worker, once the time is complete.

        >>> import timely_spark as ts
        >>> _ = ts.example(lambda s: s.to_stream("abc").count().inspect(print))
        3
        """
        return _agg.accumulate(self, 0, lambda acc, batch: acc + len(batch), name)

    def accumulate(self, init: Any, fold: Callable[[Any, list], Any], name: str = "Accumulate") -> "Stream":
        """Fold each time's batches into ``fold(acc, batch) -> acc`` (starting from
        ``init``); emit the result once the time is complete.

        >>> import timely_spark as ts
        >>> _ = ts.example(lambda s: s.to_stream([1, 2, 3]).accumulate(0, lambda a, b: a + sum(b)).inspect(print))
        6
        """
        return _agg.accumulate(self, init, fold, name)

    def aggregate(self, fold: Callable[[Any, Any, Any], Any], emit: Callable[[Any, Any], Any],
                  key: Optional[Callable[[Any], int]] = None, name: str = "Aggregate") -> "Stream":
        """Group ``(key, value)`` records by key across workers: ``fold(key, value, acc)``
        (``acc`` starts as None) and, once the time is complete, ``emit(key, acc)``.
        ``key`` maps a key to an int that picks its worker (default: a stable hash).

        >>> import timely_spark as ts
        >>> def build(s):
        ...     words = s.to_stream(["a", "b", "a"]).map(lambda w: (w, 1))
        ...     words.aggregate(lambda k, v, acc: (acc or 0) + v, lambda k, acc: (k, acc)).inspect(print)
        >>> _ = ts.example(build)
        ('a', 2)
        ('b', 1)
        """
        return _agg.aggregate(self, fold, emit, key, name)

    def state_machine(self, fold: Callable[[Any, Any, Any], tuple[Any, Iterable[Any]]],
                      key: Optional[Callable[[Any], int]] = None, name: str = "StateMachine") -> "Stream":
        """Per-key state across times: for each ``(key, value)``, in time order,
        ``fold(key, value, state) -> (new_state, outputs)`` (``state`` starts as None;
        a new state of None forgets the key).

        >>> import timely_spark as ts
        >>> def running_sum(k, v, state):
        ...     total = (state or 0) + v
        ...     return total, [(k, total)]
        >>> _ = ts.example(lambda s: s.to_stream([("x", 1), ("x", 2)]).state_machine(running_sum).inspect(print))
        ('x', 1)
        ('x', 3)
        """
        return _agg.state_machine(self, fold, key, name)

    # ---- probes ---------------------------------------------------------------------
    def probe(self) -> Any:
        """A :class:`ProbeHandle` that shows this stream's frontier.

        >>> import timely_spark as ts
        >>> def work(w):
        ...     inp, probe = w.dataflow(lambda s: (lambda i, st: (i, st.probe()))(*s.new_input()))
        ...     inp.advance_to(3)
        ...     w.step_while(lambda: probe.less_than(3), timeout=10)
        ...     return probe.frontier
        >>> ts.execute(work)
        [Antichain([3])]
        """
        from .probe import ProbeHandle

        handle = ProbeHandle()
        self.probe_with(handle)
        return handle

    def probe_with(self, handle: Any) -> "Stream":
        """Add this stream's frontier to ``handle`` (several streams may share one) and
        return the stream itself."""
        from .probe import probe_with

        probe_with(self, handle)
        return self

    # ---- loops and scopes ------------------------------------------------------------------
    def connect_loop(self, handle: Any) -> None:
        """Feed this stream back into the feedback ``handle`` made by ``scope.feedback``."""
        handle.connect(self)

    def enter(self, scope: Any) -> "Stream":
        """Bring this stream into ``scope``, a scope nested directly in this stream's scope."""
        return _enterleave.enter(self, scope)

    def leave(self) -> "Stream":
        """Take this stream out of its (nested) scope into the parent scope."""
        return _enterleave.leave(self)

    # ---- generic operators ------------------------------------------------------------------
    def unary(self, pact: Any, name: str, constructor: Callable[[Any, Any], Callable]) -> "Stream":
        """A one-input operator: ``constructor(capability, info)`` returns ``logic(input, output)``.

        >>> import timely_spark as ts
        >>> def doubler(cap, info):
        ...     cap.drop()
        ...     def logic(input, output):
        ...         for time, batch in input:
        ...             output.session(time).give_batch([2 * x for x in batch])
        ...     return logic
        >>> _ = ts.example(lambda s: s.to_stream([1, 2]).unary(None, "Double", doubler).inspect(print))
        2
        4
        """
        return _generic.unary(self, pact, name, constructor, frontier=False)

    def unary_frontier(self, pact: Any, name: str, constructor: Callable[[Any, Any], Callable]) -> "Stream":
        """Like ``unary``, and the logic runs when the input frontier changes
        (``input.frontier``).

        >>> import timely_spark as ts
        >>> def totals(cap, info):
        ...     cap.drop()
        ...     held = {}
        ...     def logic(input, output):
        ...         for time, batch in input:
        ...             c, n = held.get(time.time, (time.retain(), 0))
        ...             held[time.time] = (c, n + len(batch))
        ...         for t in [t for t in held if not input.frontier.less_equal(t)]:
        ...             c, n = held.pop(t)
        ...             output.session(c).give(n)
        ...             c.drop()
        ...     return logic
        >>> _ = ts.example(lambda s: s.to_stream("xyz").unary_frontier(None, "Totals", totals).inspect(print))
        3
        """
        return _generic.unary(self, pact, name, constructor, frontier=True)

    def unary_notify(self, pact: Any, name: str, init: Sequence[Any],
                     logic: Callable[[Any, Any, Any], Any]) -> "Stream":
        """A one-input operator with a notificator: ``logic(input, output, notificator)``.
        ``init``: times to be notified at from the start.

        >>> import timely_spark as ts
        >>> def logic(input, output, notificator):
        ...     for time, batch in input:
        ...         notificator.notify_at(time)
        ...     notificator.for_each(lambda cap: output.session(cap).give(f"done {cap.time}"))
        >>> _ = ts.example(lambda s: s.to_stream([1]).unary_notify(None, "Done", [], logic).inspect(print))
        done 0
        """
        return _generic.unary_notify(self, pact, name, init, logic)

    def binary(self, other: "Stream", pact1: Any, pact2: Any, name: str,
               constructor: Callable[[Any, Any], Callable]) -> "Stream":
        """A two-input operator: ``constructor(capability, info)`` returns
        ``logic(input1, input2, output)``.

        >>> import timely_spark as ts
        >>> def tag(cap, info):
        ...     cap.drop()
        ...     def logic(in1, in2, out):
        ...         for t, b in in1: out.session(t).give_batch([("L", x) for x in b])
        ...         for t, b in in2: out.session(t).give_batch([("R", x) for x in b])
        ...     return logic
        >>> _ = ts.example(lambda s: s.to_stream([1]).binary(s.to_stream([2]), None, None, "Tag", tag).inspect(print))
        ('L', 1)
        ('R', 2)
        """
        return _generic.binary(self, other, pact1, pact2, name, constructor, frontier=False)

    def binary_frontier(self, other: "Stream", pact1: Any, pact2: Any, name: str,
                        constructor: Callable[[Any, Any], Callable]) -> "Stream":
        """Like ``binary``, and the logic runs when either input frontier changes."""
        return _generic.binary(self, other, pact1, pact2, name, constructor, frontier=True)

    def binary_notify(self, other: "Stream", pact1: Any, pact2: Any, name: str, init: Sequence[Any],
                      logic: Callable[[Any, Any, Any, Any], Any]) -> "Stream":
        """A two-input operator with a notificator: ``logic(input1, input2, output, notificator)``;
        a time is delivered once complete at both inputs."""
        return _generic.binary_notify(self, other, pact1, pact2, name, init, logic)

    def sink(self, pact: Any, name: str, logic: Callable[[Any], Any]) -> None:
        """A final operator: ``logic(input)`` runs on new input and frontier changes.

        >>> import timely_spark as ts
        >>> _ = ts.example(lambda s: s.to_stream([4, 5]).sink(None, "Print", lambda inp: [print(b) for t, b in inp]))
        [4, 5]
        """
        _generic.sink(self, pact, name, logic)

    def vertex(self, vertex: Any, *others: "Stream", pact: Any = None) -> Any:
        """Run a Naiad-style :class:`~timely_spark.Vertex` on this stream (and ``others``)."""
        from .vertex import connect_vertex

        return connect_vertex(vertex, [self, *others], pact)

    # ---- capture (see timely_spark.capture) --------------------------------------------------
    def capture_into(self, pusher: Any, name: str = "Capture") -> None:
        """Record everything this stream shows -- data batches and frontier changes -- as
        events pushed into ``pusher`` (anything with ``push(event)``)."""
        from ..capture.capture import capture_into

        capture_into(self, pusher, name)

    def capture(self, name: str = "Capture") -> Any:
        """Capture into an in-process :class:`~timely_spark.capture.EventQueue`, returned.

        >>> import timely_spark as ts
        >>> ts.capture.extract(ts.example(lambda s: s.to_stream([2, 1]).capture()))
        [(0, [1, 2])]
        """
        from ..capture.capture import capture

        return capture(self, name)


from .operators import aggregation as _agg  # noqa: E402
from .operators import core as _core  # noqa: E402
from .operators import delay as _delay  # noqa: E402
from .operators import enterleave as _enterleave  # noqa: E402
from .operators import generic as _generic  # noqa: E402
from .operators import split as _split  # noqa: E402
