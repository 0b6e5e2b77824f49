"""Generic operators with the full capability model: unary, binary, their frontier and
notify variants, sink, and source.  Each is a thin layer over the public
:class:`~..operator.OperatorBuilder`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..notificator import Notificator
from ..operator import OperatorBuilder

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["unary", "unary_frontier", "unary_notify", "binary", "binary_frontier", "binary_notify",
           "sink", "source"]


def _unary(stream: "Stream", pact: Any, name: str, constructor: Callable, frontier: bool) -> "Stream":
    b = OperatorBuilder(stream.scope, name)
    inp = b.new_input(stream, pact)
    out, result = b.new_output()
    logic = constructor(b.initial_capability(), b.info())
    b.build(lambda: logic(inp, out), notify=frontier)
    return result


def unary(stream: "Stream", pact: Any, name: str, constructor: Callable[[Any, Any], Callable]) -> "Stream":
    """A one-input, one-output operator.  ``constructor(capability, info)`` is called
    once with the operator's initial capability (drop it if unneeded) and returns
    ``logic(input, output)``, run whenever input arrives.  ``pact`` routes the input
    (None: stays on this worker; a key function: exchange by it).

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
    return _unary(stream, pact, name, constructor, frontier=False)


def unary_frontier(stream: "Stream", pact: Any, name: str,
                   constructor: Callable[[Any, Any], Callable]) -> "Stream":
    """Like :func:`unary`, and the logic also runs when the input frontier changes
    (``input.frontier`` holds it).

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
    return _unary(stream, pact, name, constructor, frontier=True)


def _binary(stream: "Stream", other: "Stream", pact1: Any, pact2: Any, name: str, constructor: Callable,
            frontier: bool) -> "Stream":
    b = OperatorBuilder(stream.scope, name)
    in1 = b.new_input(stream, pact1)
    in2 = b.new_input(other, pact2)
    out, result = b.new_output()
    logic = constructor(b.initial_capability(), b.info())
    b.build(lambda: logic(in1, in2, out), notify=frontier)
    return result


def binary(stream: "Stream", other: "Stream", pact1: Any, pact2: Any, name: str,
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
    return _binary(stream, other, pact1, pact2, name, constructor, frontier=False)


def binary_frontier(stream: "Stream", other: "Stream", pact1: Any, pact2: Any, name: str,
                    constructor: Callable[[Any, Any], Callable]) -> "Stream":
    """Like :func:`binary`, and the logic also runs when either input frontier changes.

    >>> import timely_spark as ts
    >>> def last_of_both(cap, info):
    ...     cap.drop()
    ...     seen = []
    ...     def logic(in1, in2, out):
    ...         for t, b in in1: seen.append((t.retain(), b))
    ...         for t, b in in2: seen.append((t.retain(), b))
    ...         if in1.frontier.is_empty() and in2.frontier.is_empty():
    ...             for c, b in seen:
    ...                 out.session(c).give_batch(b)
    ...                 c.drop()
    ...             seen.clear()
    ...     return logic
    >>> _ = ts.example(lambda s: s.to_stream([1]).binary_frontier(s.to_stream([2]), None, None, "Both",
    ...                                                           last_of_both).inspect(print))
    1
    2
    """
    return _binary(stream, other, pact1, pact2, name, constructor, frontier=True)


def _notificator(b: OperatorBuilder, frontiers: list, init: Sequence[Any], state: Any = None) -> Notificator:
    """The operator's notificator, its ``init`` times requested; its pending times (and
    ``state``, a :class:`~.op_state.StateHooks`, if given) kept in snapshots."""
    notificator = Notificator(frontiers, b.core)
    cap = b.initial_capability()

    if state is not None and state.keyed:          # the state says which times to request again
        restored_table = b.keep_state(state.save, keyed=True)
        times = init if restored_table is None else (state.restore(restored_table) or ())
        for t in times:
            notificator.notify_at(cap.delayed(t))
        cap.drop()
        return notificator

    def save(t: Any) -> dict:
        return {"pending": notificator.pending(), "state": None if state is None else state.save(t)}

    restored = b.keep_state(save)
    if restored is None:
        for t in init:
            notificator.notify_at(cap.delayed(t))
    else:
        for t in restored["pending"]:
            notificator.notify_at(cap.delayed(t))
        if state is not None:
            state.restore(restored["state"])
    cap.drop()
    return notificator


def _rerun_if_deliverable(b: OperatorBuilder, notificator: Notificator, run: Callable[[], Any]) -> Callable[[], None]:
    activate = b.core.activate

    def logic() -> None:
        run()
        if notificator.has_deliverable():   # requested for a time already complete
            activate()

    return logic


def unary_notify(stream: "Stream", pact: Any, name: str, init: Sequence[Any],
                 logic: Callable[[Any, Any, Any], Any], state: Any = None) -> "Stream":
    """A one-input operator with a :class:`~..notificator.Notificator`:
    ``logic(input, output, notificator)``; ``init`` lists times to be notified at from
    the start.  A notification for ``t`` comes once no record at a time ``<= t`` can
    still arrive.

    Snapshots keep the notificator's pending times: a restored run requests each of them
    again (so a notification requested for earlier input is not lost; one requested for
    input at or after the snapshot time may come although the restored logic holds
    nothing for it: logic must allow that).  ``state``, a
    :class:`~.op_state.StateHooks`, keeps the logic's own state with them:
    ``save(t)`` must give what was folded from the times before ``t`` only.  A keyed
    ``state`` (re-sharded on a restore into another worker count) replaces the pending
    times: its ``restore(table)`` returns the times to be notified at again.

    >>> import timely_spark as ts
    >>> def logic(input, output, notificator):
    ...     for time, batch in input:
    ...         notificator.notify_at(time)
    ...     notificator.for_each(lambda cap: output.session(cap).give(f"done {cap.time}"))
    >>> _ = ts.example(lambda s: s.to_stream([1]).unary_notify(None, "Done", [], logic).inspect(print))
    done 0
    """
    b = OperatorBuilder(stream.scope, name)
    inp = b.new_input(stream, pact)
    out, result = b.new_output()
    notificator = _notificator(b, [inp.frontier], init, state)
    b.build(_rerun_if_deliverable(b, notificator, lambda: logic(inp, out, notificator)), notify=True)
    return result


def binary_notify(stream: "Stream", other: "Stream", pact1: Any, pact2: Any, name: str, init: Sequence[Any],
                  logic: Callable[[Any, Any, Any, Any], Any], state: Any = None) -> "Stream":
    """A two-input operator with a notificator: ``logic(input1, input2, output,
    notificator)``; a time is delivered once it is complete at both inputs.  Snapshots
    and ``state``: as :func:`unary_notify`.

    >>> import timely_spark as ts
    >>> def logic(in1, in2, out, notificator):
    ...     for t, b in in1: notificator.notify_at(t)
    ...     for t, b in in2: notificator.notify_at(t)
    ...     notificator.for_each(lambda cap: out.session(cap).give(f"both done at {cap.time}"))
    >>> _ = ts.example(lambda s: s.to_stream([1]).binary_notify(s.to_stream([2]), None, None, "Both", [],
    ...                                                         logic).inspect(print))
    both done at 0
    """
    b = OperatorBuilder(stream.scope, name)
    in1 = b.new_input(stream, pact1)
    in2 = b.new_input(other, pact2)
    out, result = b.new_output()
    notificator = _notificator(b, [in1.frontier, in2.frontier], init, state)
    b.build(_rerun_if_deliverable(b, notificator, lambda: logic(in1, in2, out, notificator)), notify=True)
    return result


def sink(stream: "Stream", pact: Any, name: str, logic: Callable[[Any], Any]) -> None:
    """A final operator: ``logic(input)`` runs on new input and on frontier changes.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream([4, 5]).sink(None, "Print", lambda inp: [print(b) for t, b in inp]))
    [4, 5]
    """
    b = OperatorBuilder(stream.scope, name)
    inp = b.new_input(stream, pact)
    b.build(lambda: logic(inp), notify=True, initial_capabilities=False)


def source(scope: Any, name: str, constructor: Callable[[Any, Any], Callable[[Any], Any]]) -> "Stream":
    """An operator with no inputs: ``constructor(capability, info)`` returns
    ``logic(output)``, run when activated (``info.activate()`` asks for another run).
    The stream ends when the capability (and those made from it) are dropped.

    >>> import timely_spark as ts
    >>> def countdown(cap, info):
    ...     state = {"n": 3}
    ...     def logic(output):
    ...         if state["n"]:
    ...             output.session(cap).give(state["n"])
    ...             state["n"] -= 1
    ...             info.activate()
    ...         else:
    ...             cap.drop()
    ...     return logic
    >>> _ = ts.example(lambda s: ts.source(s, "Countdown", countdown).inspect(print))
    3
    2
    1
    """
    b = OperatorBuilder(scope, name)
    out, result = b.new_output()
    logic = constructor(b.initial_capability(), b.info())
    b.build(lambda: logic(out))
    return result
