"""Generic operators with the full capability model: unary, binary, their
frontier and notify variants, sink, and source."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..notificator import Notificator
from ..operator import OperatorBuilder
from ..ports import OutputHandle

__all__ = ["unary", "binary", "unary_notify", "binary_notify", "sink", "source"]


def _output(b: OperatorBuilder) -> tuple[OutputHandle, Any]:
    port, stream = b.new_output()
    handle = OutputHandle(port, b.core)
    b.core.handles.append(handle)
    return handle, stream


def unary(stream: Any, pact: Any, name: str, constructor: Callable, frontier: bool) -> Any:
    b = OperatorBuilder(stream.scope, name)
    inp = b.new_input(stream, pact)
    out, result = _output(b)
    logic = constructor(b.initial_capability(), b.info())
    b.build(lambda: logic(inp, out), notify=frontier)
    return result


def binary(stream: Any, other: Any, pact1: Any, pact2: Any, name: str, constructor: Callable,
           frontier: bool) -> Any:
    b = OperatorBuilder(stream.scope, name)
    in1 = b.new_input(stream, pact1)
    in2 = b.new_input(other, pact2)
    out, result = _output(b)
    logic = constructor(b.initial_capability(), b.info())
    b.build(lambda: logic(in1, in2, out), notify=frontier)
    return result


def _notifying(b: OperatorBuilder, init: Sequence[Any]) -> Notificator:
    notificator = Notificator(b.core.frontiers, b.core)
    cap = b.initial_capability()
    for t in init:
        notificator.notify_at(cap.delayed(t))
    cap.drop()
    return notificator


def _reactivating(b: OperatorBuilder, notificator: Notificator, run: Callable[[], Any]) -> Callable[[], None]:
    activate = b.core.activate

    def logic() -> None:
        run()
        if notificator.has_deliverable():   # requested for a time already complete
            activate()

    return logic


def unary_notify(stream: Any, pact: Any, name: str, init: Sequence[Any], logic: Callable) -> Any:
    b = OperatorBuilder(stream.scope, name)
    inp = b.new_input(stream, pact)
    out, result = _output(b)
    notificator = _notifying(b, init)
    b.build(_reactivating(b, notificator, lambda: logic(inp, out, notificator)), notify=True)
    return result


def binary_notify(stream: Any, other: Any, pact1: Any, pact2: Any, name: str, init: Sequence[Any],
                  logic: Callable) -> Any:
    b = OperatorBuilder(stream.scope, name)
    in1 = b.new_input(stream, pact1)
    in2 = b.new_input(other, pact2)
    out, result = _output(b)
    notificator = _notifying(b, init)
    b.build(_reactivating(b, notificator, lambda: logic(in1, in2, out, notificator)), notify=True)
    return result


def sink(stream: Any, pact: Any, name: str, logic: Callable[[Any], Any]) -> None:
    b = OperatorBuilder(stream.scope, name)
    inp = b.new_input(stream, pact)
    b.build(lambda: logic(inp), notify=True, initial_capabilities=False)


def source(scope: Any, name: str, constructor: Callable[[Any, Any], Callable[[Any], Any]]) -> Any:
    """An operator with no inputs: ``constructor(capability, info)`` returns
    ``logic(output)``, run when activated (``info.activate()`` asks for another run).

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
    out, result = _output(b)
    logic = constructor(b.initial_capability(), b.info())
    b.build(lambda: logic(out))
    return result
