"""Outer times one at a time through a loop, for incremental algorithms.

Inside ``scope.iterative``, times are ``(outer, round)`` in the product order, so
round 0 of epoch ``T+1`` is incomparable with round 5 of epoch ``T``: an operator
fed both may see ``T+1``'s new edges while ``T`` is still converging.  An algorithm
that keeps one state across epochs (a warm start) needs epoch ``T`` finished first.
:func:`in_order` gives a stream that never carries data and whose frontier holds
``(T, 0)`` until no round of an earlier epoch can still happen: pass it among a
``per_time``'s ``others`` and that operator sees the epochs strictly in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..dataflow import ExchangeBy, OperatorBuilder, StateHooks
from ..progress import less_equal

if TYPE_CHECKING:
    from ..dataflow import Stream

__all__ = ["in_order", "rounds_in_order"]


def _before(a: Any, b: Any) -> bool:
    return a != b and less_equal(a, b)


def in_order(entered: "Stream", cycle: "Stream", name: str = "InOrder") -> "Stream":
    """A data-free stream whose frontier holds ``(T, 0)``, for each epoch ``T`` that
    has data on ``entered`` (the loop's input, at round 0), until ``cycle`` (the loop's
    feedback) and ``entered`` have no time of an epoch before ``T`` left.

    >>> import pyarrow as pa, timely_spark as ts
    >>> def build(s):
    ...     def loop(inner):
    ...         handle, cycle = inner.feedback(1)
    ...         entered = s.to_stream(pa.table({"x": [1]})).enter(inner)
    ...         gate = in_order(entered, cycle)
    ...         out = entered.per_time(lambda t, b, c, g: None, others=(cycle, gate))
    ...         out.connect_loop(handle)
    ...         return out.leave()
    ...     return s.iterative(loop)
    >>> _ = ts.example(build)
    """
    b = OperatorBuilder(entered.scope, name)
    edge_in = b.new_input(entered)
    loop_in = b.new_input(cycle)
    _, gate = b.new_output("gate")
    b.initial_capability().drop()
    held: dict = {}                                      # outer time -> capability at (outer, 0)

    def logic() -> None:
        for cap, _data in edge_in:
            if cap.time[0] not in held:
                held[cap.time[0]] = cap.retain()
        for _cap, _data in loop_in:
            pass
        busy = [e[0] for e in loop_in.frontier.elements()] + [e[0] for e in edge_in.frontier.elements()]
        busy += list(held)
        for outer in [o for o in held if not any(_before(e, o) for e in busy)]:
            held.pop(outer).drop()

    b.build(logic, notify=lambda: bool(held))      # (input arriving runs it all the same)
    return gate


def rounds_in_order(edges: "Stream", make_state: Callable[[Any], Any], src: str, name: str) -> "Stream":
    """The loop the incremental graph algorithms share: ``edges`` (routed by ``src``) and
    the loop's own feedback (routed by ``vertex``) meet in one ``per_time`` whose logic is
    ``make_state(inner_scope).step``, epochs strictly in order (:func:`in_order`).  Batches
    the step returns with a ``kind`` column go round the loop again; the others leave it,
    and are the returned stream (at the outer times).

    Snapshots keep the state object's ``snapshot()`` (a keyed table: it re-shards) and a
    restore hands it to its ``restore(table)``: at a snapshot at ``t`` the epochs before
    ``t`` are done and ``t`` has not begun (it is not complete), so that is the state for
    the times before ``t``."""
    def loop(inner: Any) -> Any:
        handle, cycle = inner.feedback(1)
        entered = edges.enter(inner)
        gate = in_order(entered, cycle, f"{name}Order")
        state = make_state(inner)
        kept = StateHooks(lambda t: state.snapshot(), state.restore, keyed=True)
        out = entered.per_time(state.step, others=(cycle, gate),
                               exchange=[ExchangeBy([src], name), ExchangeBy(["vertex"], name), None], name=name,
                               state=kept)
        out.flat_map(lambda rb: [rb] if "kind" in rb.schema.names else []).connect_loop(handle)
        return out.flat_map(lambda rb: [] if "kind" in rb.schema.names else [rb]).leave()

    return edges.scope.iterative(loop)
