"""per_time: collect each time's record batches, act once the time is complete.

The shape most columnar operators share (a keyed aggregation, an incremental graph
algorithm, a window): hold the batches that arrive at each time, and when the
frontier of every input has passed that time, call ``logic`` once with all of them,
in time order, and send what it returns at that time.  ``logic`` may keep state in
its closure between times; that is how incremental operators keep their indexes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, NamedTuple, Optional, Sequence

import pyarrow as pa

from ...errors import CheckpointError
from ...progress import less_equal, sort_key
from ..operator import OperatorBuilder
from .exchange_by import check_batch
from .op_state import before

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["per_time", "Emit"]


class Emit(NamedTuple):
    """What ``logic`` may return instead of record batches, when it sends at later times
    or must look at a later time again: ``batches`` maps times ``>=`` the completed time
    to the record batches to send at each; ``wake`` lists times ``>=`` it at which
    ``logic`` is to be called once they are complete, with or without input then (an
    incremental operator's "interesting times").

    >>> Emit({3: []}, [4]).wake
    [4]
    """

    batches: dict
    wake: Sequence = ()


def per_time(stream: "Stream", logic: Callable[..., Optional[Iterable[pa.RecordBatch]]],
             others: Sequence["Stream"] = (), exchange: Any = None,
             name: str = "PerTime", state: Any = None,
             advance: Optional[Callable[[list], None]] = None) -> "Stream":
    """Call ``logic(time, batches, *others_batches)`` once per completed time and send
    the record batches it returns (an iterable, or ``None``) at that time.

    Contract: ``batches`` (and one list per stream in ``others``) holds every record
    batch that arrived at ``time`` on that input at this worker -- possibly an empty
    list for some input, never for all.  A time is delivered once no input can still
    receive data at a time ``<=`` it, and times are delivered in an order consistent
    with their partial order; a time at which no input received data is never
    delivered -- unless ``logic`` asked to be woken at it: ``logic`` may return an
    :class:`Emit` (batches at times ``>=`` the completed one, times to wake at).
    ``advance(frontier)``, if given, is called after each activation that completed
    times with the elements of the inputs' joint frontier (no time that is not at or
    beyond one of them will be delivered again: state may be compacted to it).
    ``exchange`` routes the inputs first: ``None`` (stay on this worker),
    one pact for every input (e.g. ``ExchangeBy(["key"])``), or a list with one pact
    (or ``None``) per input.  A record that is not a ``pyarrow.RecordBatch`` raises an
    error naming the operator.

    ``state``: the state ``logic`` keeps across times, for snapshots -- a
    :class:`~.op_state.StateHooks` ``(save, restore, keyed)``: ``save(t)`` gives the state
    folded from the times before ``t`` (keyed: a table with ``KEY_HASH``), ``restore``
    gets it back when a run restores and may return times ``logic`` is to be woken at
    again (as from an :class:`Emit`).  Since a time reaches ``logic`` only once it is
    complete, and a snapshot's time ``t`` is not complete when it is taken, ``logic``'s
    state is exactly that of the times before ``t``; the batches held for times not yet
    complete are not saved (the restored run sends them again).

    >>> import pyarrow as pa, timely_spark as ts
    >>> def total(time, batches):
    ...     n = sum(b.num_rows for b in batches)
    ...     return [pa.record_batch({"time": [time], "rows": [n]})]
    >>> def build(scope):
    ...     inp, stream = scope.new_input()
    ...     stream.per_time(total).inspect(lambda b: print(b.to_pydict()))
    ...     for t in (2, 0, 0):
    ...         inp.send(pa.record_batch({"x": [t]}))
    ...     inp.close()
    >>> _ = ts.example(build)
    {'time': [0], 'rows': [3]}
    """
    streams = [stream, *others]
    pacts = list(exchange) if isinstance(exchange, (list, tuple)) else [exchange] * len(streams)
    if len(pacts) != len(streams):
        from ...errors import ParameterError
        raise ParameterError(f"operator {name!r}: exchange has {len(pacts)} pacts for {len(streams)} inputs",
                             "exchange")
    builder = OperatorBuilder(stream.scope, name)
    inputs = [builder.new_input(s, p) for s, p in zip(streams, pacts)]
    out, result = builder.new_output()
    initial = builder.initial_capability()
    pending: dict = {}                      # time -> [capability, [batches of input 0], ...]
    if state is not None:
        def save(t: Any) -> Any:
            early = [p for p in pending if before(p, t)]
            if early:
                raise CheckpointError(f"operator {name!r}: a snapshot at time {t!r} found input at time "
                                      f"{early[0]!r} not yet processed (its output is not consumed?)")
            return state.save(t)

        restored = builder.keep_state(save, keyed=state.keyed)
        if restored is not None:
            for when in state.restore(restored) or ():         # times to be woken at again
                pending.setdefault(when, [initial.delayed(when), *([] for _ in inputs)])
    initial.drop()

    def logic_() -> None:
        for i, inp in enumerate(inputs):
            for cap, data in inp:
                entry = pending.get(cap.time)
                if entry is None:
                    entry = pending[cap.time] = [cap.retain(), *([] for _ in inputs)]
                entry[1 + i].extend(check_batch(record, name) for record in data)
        done = sorted((t for t in pending if not any(inp.frontier.less_equal(t) for inp in inputs)), key=sort_key)
        completed = bool(done)
        while done:
            t = done.pop(0)
            cap, *held = pending.pop(t)
            produced = logic(t, *held)
            if isinstance(produced, Emit):
                if send_later(cap, t, produced):       # woken times complete already go in order
                    done = sorted((t for t in pending if not any(inp.frontier.less_equal(t) for inp in inputs)),
                                  key=sort_key)
            elif produced is not None:
                batches = [b for b in produced if b.num_rows]
                if batches:
                    out.session(cap).give_batch(batches)
            cap.drop()
        if completed and advance is not None:
            advance(joint_frontier())

    def send_later(cap: Any, t: Any, emit: Emit) -> bool:
        """Send ``emit``'s batches, hold its wake times; whether a wake time was new."""
        for when, batches in emit.batches.items():
            batches = [b for b in batches if b.num_rows]
            if batches:
                out.session(cap if when == t else cap.delayed(when)).give_batch(batches)
        new = False
        for when in emit.wake:
            if when not in pending:
                pending[when] = [cap.delayed(when), *([] for _ in inputs)]
                new = True
        return new

    def joint_frontier() -> list:
        times = {t for inp in inputs for t in inp.frontier.elements()}
        return [t for t in times if not any(u != t and less_equal(u, t) for u in times)]

    builder.build(logic_, notify=lambda: bool(pending))      # a frontier change completes a held time, or nothing
    return result
