"""Per-time aggregation: accumulate (and count), aggregate by key, state_machine.

Each holds a capability per time with data and emits once that time is complete.

Snapshots (``OperatorBuilder.keep_state``): ``state_machine`` folds a time's records
into its per-key states only once the time is complete, so at a snapshot at ``t`` (not
complete) nothing of ``t`` or later is in them.  What is saved: the times before ``t`` still held (each time's input is
folded apart from the other times', so the times at or after ``t`` are left out; their
capabilities are re-created from the initial capability on a restore)
and ``state_machine``'s per-key states.  ``accumulate`` (and ``count``) store each held
time's accumulator with the index of its worker as the key hash (its input is not
exchanged): into another worker count, worker ``i``'s go to worker ``i % workers``, and
two accumulators of one time meeting there raise RestoreError; ``aggregate`` and
``state_machine`` store each key's entry with its route value ``key(k)`` (the int the
exchange routes by), so their state re-shards into another worker count -- unless a
route value is not an int in [0, 2**64): then it restores into the same worker count
only (RestoreError naming the operator otherwise).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from ...errors import RestoreError
from ...progress import sort_key
from ..channels import Exchange, Pipeline, stable_hash
from ..operator import OperatorBuilder
from .op_state import before, entries_of, keyed_entries

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["count", "accumulate", "aggregate", "state_machine"]


def _key_route(key: Optional[Callable[[Any], int]]) -> Exchange:
    route = key or stable_hash
    return Exchange(lambda kv: route(kv[0]))


def _frontier_operator(stream: "Stream", pact: Any, name: str,
                       constructor: Callable[[Any, OperatorBuilder], Callable]) -> "Stream":
    """A unary frontier operator whose ``constructor(initial_capability, builder)`` may
    declare state (``builder.keep_state``) and returns ``logic(input, output)``."""
    b = OperatorBuilder(stream.scope, name)
    inp = b.new_input(stream, pact)
    out, result = b.new_output()
    logic = constructor(b.initial_capability(), b)
    b.build(lambda: logic(inp, out), notify=True)
    return result


def _emit_complete(frontier: Any, held: dict, emit: Callable[[Any, Any, Any], None]) -> None:
    """Emit, earliest first, every held time the frontier has passed."""
    done = [t for t in held if not frontier.less_equal(t)]
    for t in sorted(done, key=sort_key):
        cap, state = held.pop(t)
        emit(cap, t, state)
        cap.drop()


def accumulate(stream: "Stream", init: Any, fold: Callable[[Any, list], Any], name: str = "Accumulate") -> "Stream":
    """Fold each time's batches on this worker into ``fold(acc, batch) -> acc``
    (starting from ``init``); emit the result once the time is complete.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream([1, 2, 3]).accumulate(0, lambda a, b: a + sum(b)).inspect(print))
    6
    """
    def constructor(cap: Any, builder: OperatorBuilder) -> Callable:
        held: dict[Any, list] = {}     # time -> [capability, acc]

        index, peers = builder.info().worker_index, builder.info().peers

        def save(t: Any) -> Any:
            kept = [(time, e[1]) for time, e in held.items() if before(time, t)]
            return keyed_entries([index] * len(kept), kept, peers)

        for time, acc in entries_of(builder.keep_state(save, keyed=True), name, peers):
            if time in held:
                raise RestoreError(f"operator {name!r}: the accumulators of two workers at time {time!r} meet "
                                   f"on one worker in this restore into another worker count, and accumulate "
                                   f"cannot merge them (restore into the snapshot's worker count)")
            held[time] = [cap.delayed(time), acc]
        cap.drop()

        def logic(input: Any, output: Any) -> None:
            for icap, data in input:
                entry = held.get(icap.time)
                if entry is None:
                    entry = held[icap.time] = [icap.retain(), init]
                entry[1] = fold(entry[1], data)
            _emit_complete(input.frontier, held, lambda c, t, acc: output.session(c).give(acc))

        return logic

    return _frontier_operator(stream, Pipeline, name, constructor)


def count(stream: "Stream", name: str = "Count") -> "Stream":
    """The number of records at each time on this worker, once the time is complete.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream("abc").count().inspect(print))
    3
    """
    return accumulate(stream, 0, lambda acc, batch: acc + len(batch), name)


def aggregate(stream: "Stream", fold: Callable[[Any, Any, Any], Any], emit: Callable[[Any, Any], Any],
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
    route = key or stable_hash

    def constructor(cap: Any, builder: OperatorBuilder) -> Callable:
        held: dict[Any, list] = {}     # time -> [capability, {key: acc}]
        peers = builder.info().peers

        def save(t: Any) -> Any:
            times = [time for time in held if before(time, t)]
            return keyed_entries((route(k) for time in times for k in held[time][1]),
                                 ((time, k, acc) for time in times for k, acc in held[time][1].items()), peers)

        for time, k, acc in entries_of(builder.keep_state(save, keyed=True), name, peers):
            entry = held.get(time)
            if entry is None:
                entry = held[time] = [cap.delayed(time), {}]
            entry[1][k] = acc
        cap.drop()

        def logic(input: Any, output: Any) -> None:
            for icap, data in input:
                entry = held.get(icap.time)
                if entry is None:
                    entry = held[icap.time] = [icap.retain(), {}]
                aggs = entry[1]
                for k, v in data:
                    aggs[k] = fold(k, v, aggs.get(k))

            def out(c: Any, t: Any, aggs: dict) -> None:
                output.session(c).give_batch([emit(k, a) for k, a in aggs.items()])

            _emit_complete(input.frontier, held, out)

        return logic

    return _frontier_operator(stream, _key_route(key), name, constructor)


def state_machine(stream: "Stream", fold: Callable[[Any, Any, Any], tuple[Any, Iterable[Any]]],
                  key: Optional[Callable[[Any], int]] = None, name: str = "StateMachine") -> "Stream":
    """Per-key state across times: for each ``(key, value)``, in time order,
    ``fold(key, value, state) -> (new_state, outputs)`` (``state`` starts as None;
    a new state of None forgets the key).  Keys are exchanged like :func:`aggregate`.

    >>> import timely_spark as ts
    >>> def running_sum(k, v, state):
    ...     total = (state or 0) + v
    ...     return total, [(k, total)]
    >>> _ = ts.example(lambda s: s.to_stream([("x", 1), ("x", 2)]).state_machine(running_sum).inspect(print))
    ('x', 1)
    ('x', 3)
    """
    route = key or stable_hash

    def constructor(cap: Any, builder: OperatorBuilder) -> Callable:
        held: dict[Any, list] = {}     # time -> [capability, [records]], folded once the time is complete
        states: dict[Any, Any] = {}
        peers = builder.info().peers

        def save(t: Any) -> Any:
            pending = [(time, kv) for time, e in held.items() if before(time, t) for kv in e[1]]
            return keyed_entries([route(k) for k in states] + [route(kv[0]) for _, kv in pending],
                                 [(None, k, s) for k, s in states.items()] + [(time, kv, None) for time, kv in pending],
                                 peers)

        for time, k, s in entries_of(builder.keep_state(save, keyed=True), name, peers):
            if time is None:
                states[k] = s
                continue
            entry = held.get(time)
            if entry is None:
                entry = held[time] = [cap.delayed(time), []]
            entry[1].append(k)
        cap.drop()

        def logic(input: Any, output: Any) -> None:
            for icap, data in input:
                entry = held.get(icap.time)
                if entry is None:
                    entry = held[icap.time] = [icap.retain(), []]
                entry[1].extend(data)

            def run(c: Any, t: Any, records: list) -> None:
                session = output.session(c)
                for k, v in records:
                    new, outputs = fold(k, v, states.get(k))
                    if new is None:
                        states.pop(k, None)
                    else:
                        states[k] = new
                    session.give_batch(outputs)

            _emit_complete(input.frontier, held, run)

        return logic

    return _frontier_operator(stream, _key_route(key), name, constructor)
