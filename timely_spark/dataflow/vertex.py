"""Naiad's vertex model: ``on_recv`` / ``on_notify`` callbacks, ``send_by`` / ``notify_at``.

Subclass :class:`Vertex` and connect it with ``stream.vertex(v)`` (or
``stream.vertex(v, other_stream)`` for more inputs).  Snapshots keep a vertex's
pending notifications and what its :meth:`Vertex.checkpoint` returns.  Messages and notifications
never go backwards: inside a callback for time ``t`` you may send and request
notifications at times ``>= t`` only.

>>> import timely_spark as ts
>>> class Select(ts.Vertex):
...     def __init__(self, selector):
...         self.selector = selector
...     def on_recv(self, input, records, time):
...         self.send_by(self.output, [self.selector(r) for r in records], time)
>>> class Count(ts.Vertex):
...     def __init__(self):
...         self.counts = {}
...     def on_recv(self, input, records, time):
...         if time not in self.counts:
...             self.counts[time] = 0
...             self.notify_at(time)          # ask to hear when time is complete
...         self.counts[time] += len(records)
...     def on_notify(self, time):
...         self.send_by(self.output, [self.counts.pop(time)], time)
>>> _ = ts.example(lambda s: s.to_stream("abc").vertex(Select(str.upper)).inspect(print).vertex(Count()).inspect(print))
A
B
C
3
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence

from ..errors import CapabilityError
from ..progress import less_equal
from .notificator import Notificator
from .operator import OperatorBuilder
from .ports import OutputHandle

if TYPE_CHECKING:
    from .stream import Stream

__all__ = ["Vertex", "vertex"]


class Vertex:
    """A stateful vertex.  ``outputs`` (class attribute) is its number of outputs;
    ``self.output`` names output 0.  Override :meth:`on_recv` and :meth:`on_notify`;
    call :meth:`send_by` and :meth:`notify_at` from inside them.

    >>> import timely_spark as ts
    >>> class Total(ts.Vertex):             # one sum per time, once the time is complete
    ...     def __init__(self):
    ...         self.sums = {}
    ...     def on_recv(self, input, records, time):
    ...         if time not in self.sums:
    ...             self.sums[time] = 0
    ...             self.notify_at(time)
    ...         self.sums[time] += sum(records)
    ...     def on_notify(self, time):
    ...         self.send_by(self.output, [self.sums.pop(time)], time)
    >>> _ = ts.example(lambda s: s.to_stream([1, 2, 3]).vertex(Total()).inspect(print))
    6
    """

    outputs: int = 1
    output: int = 0
    name: Optional[str] = None
    _ctx: Any = None

    def attach(self, context: Any) -> None:
        """Connect the vertex to its operator (``stream.vertex`` does this; a vertex
        that was never attached cannot send).

        >>> Vertex().send_by(0, [1], 0)
        Traceback (most recent call last):
        timely_spark.errors.CapabilityError: vertex Vertex: send_by/notify_at work only inside a callback
        """
        self._ctx = context

    def on_recv(self, input: int, records: list, time: Any) -> None:
        """``records`` arrived on ``input`` at ``time`` (override it; by default
        records are dropped).

        >>> import timely_spark as ts
        >>> class Show(ts.Vertex):
        ...     def on_recv(self, input, records, time):
        ...         print(input, records, time)
        >>> _ = ts.example(lambda s: s.to_stream("ab").vertex(Show()))
        0 ['a', 'b'] 0
        """

    def on_notify(self, time: Any) -> None:
        """No more messages at times ``<= time`` can arrive (requested by ``notify_at``;
        override it).

        >>> import timely_spark as ts
        >>> class Done(ts.Vertex):
        ...     def on_recv(self, input, records, time):
        ...         self.notify_at(time)
        ...     def on_notify(self, time):
        ...         print("complete:", time)
        >>> _ = ts.example(lambda s: s.to_stream("ab").vertex(Done()))
        complete: 0
        """

    def checkpoint(self, time: Any) -> Any:
        """The vertex's state for the times before ``time``, for a snapshot at ``time``
        (Naiad's Checkpoint; override it with :meth:`restore`): any picklable value,
        folded from records at times before ``time`` only (records at ``time`` or later
        are sent again to the restored run).  By default None: nothing beyond the
        pending notifications, which snapshots always keep.

        >>> import timely_spark as ts
        >>> class Total(ts.Vertex):
        ...     def __init__(self):
        ...         self.sums = {}
        ...     def checkpoint(self, time):
        ...         return {t: n for t, n in self.sums.items() if t < time}
        ...     def restore(self, state):
        ...         self.sums = dict(state)
        >>> v = Total(); v.sums = {1: 5, 3: 2}
        >>> w = Total(); w.restore(v.checkpoint(2)); w.sums
        {1: 5}
        """
        return None

    def restore(self, state: Any) -> None:
        """Take back what :meth:`checkpoint` returned, when a run restores from a
        snapshot (before any callback; override it with :meth:`checkpoint`).  The
        notifications pending at the snapshot are requested again for the vertex: one
        may come for a time it holds nothing for (requested for records the restored
        run sends again).

        >>> Vertex().restore(None)
        """

    def send_by(self, output: int, records: Sequence[Any], time: Any) -> None:
        """Send ``records`` on ``output`` at ``time`` (not before the callback's time,
        else CapabilityError).

        >>> import timely_spark as ts
        >>> class Later(ts.Vertex):
        ...     def on_recv(self, input, records, time):
        ...         self.send_by(self.output, records, time + 1)
        >>> _ = ts.example(lambda s: s.to_stream("a").vertex(Later()).inspect_time(lambda t, x: print(t, x)))
        1 a
        """
        self._context().send_by(output, records, time)

    def notify_at(self, time: Any) -> None:
        """Ask for ``on_notify(time)`` once ``time`` is complete (not before the callback's time).

        >>> import timely_spark as ts
        >>> class Remind(ts.Vertex):
        ...     def on_recv(self, input, records, time):
        ...         self.notify_at(time + 2)
        ...     def on_notify(self, time):
        ...         self.send_by(self.output, ["reminder"], time)
        >>> _ = ts.example(lambda s: s.to_stream("a").vertex(Remind()).inspect_time(lambda t, x: print(t, x)))
        2 reminder
        """
        self._context().notify_at(time)

    def _context(self) -> "_Context":
        ctx = self._ctx
        if ctx is None:
            raise CapabilityError(f"vertex {type(self).__name__}: send_by/notify_at work only inside a callback")
        return ctx


class _Context:
    def __init__(self, name: str, outputs: list[OutputHandle], notificator: Notificator) -> None:
        self.name = name
        self.outputs = outputs
        self.notificator = notificator
        self.current: Any = None

    def _cap_for(self, time: Any, verb: str) -> Any:
        cap = self.current
        if cap is None:
            raise CapabilityError(f"vertex {self.name!r}: cannot {verb} outside on_recv/on_notify")
        if not less_equal(cap.time, time):
            raise CapabilityError(
                f"vertex {self.name!r}: cannot {verb} at {time!r} from a callback at {cap.time!r} "
                "(messages and notifications never go backwards in time)")
        return cap

    def send_by(self, output: int, records: Sequence[Any], time: Any) -> None:
        cap = self._cap_for(time, "send")
        if cap.time == time:
            self.outputs[output].session(cap).give_batch(records)
        else:
            later = cap.delayed(time)
            self.outputs[output].session(later).give_batch(records)
            later.drop()  # the batch leaves in the same progress batch as the drop

    def notify_at(self, time: Any) -> None:
        self.notificator.notify_at(self._cap_for(time, "request a notification").delayed(time))


def vertex(stream: "Stream", vertex: Vertex, *others: "Stream", pact: Any = None) -> Any:
    """Run a Naiad-style :class:`Vertex` on this stream (and ``others``, its further
    inputs, numbered from 1); returns its output stream, or a tuple of them when the
    vertex has several ``outputs``.  See also the module docstring.

    >>> import timely_spark as ts
    >>> class Route(ts.Vertex):
    ...     outputs = 2                  # output 0: from this stream; output 1: from the other
    ...     def on_recv(self, input, records, time):
    ...         self.send_by(input, records, time)
    >>> def build(s):
    ...     mine, theirs = s.to_stream("ab").vertex(Route(), s.to_stream("xy"))
    ...     theirs.inspect(print)
    >>> _ = ts.example(build)
    x
    y
    """
    name = vertex.name or type(vertex).__name__
    b = OperatorBuilder(stream.scope, name)
    inputs = [b.new_input(s, pact) for s in (stream, *others)]
    handles, results = [], []
    for o in range(vertex.outputs):
        handle, out = b.new_output(str(o))
        handles.append(handle)
        results.append(out)
    notificator = Notificator([inp.frontier for inp in inputs], b.core)
    initial = b.initial_capability()
    restored = b.keep_state(lambda t: {"pending": notificator.pending(), "state": vertex.checkpoint(t)})
    if restored is not None:
        for t in restored["pending"]:
            notificator.notify_at(initial.delayed(t))
        vertex.restore(restored["state"])
    initial.drop()
    ctx = _Context(name, handles, notificator)
    vertex.attach(ctx)
    activate = b.info().activate

    def logic() -> None:
        try:
            for i, inp in enumerate(inputs):
                for cap, data in inp:
                    ctx.current = cap
                    vertex.on_recv(i, data, cap.time)
            for held in notificator:
                ctx.current = held
                vertex.on_notify(held.time)
        finally:
            ctx.current = None
        if notificator.has_deliverable():
            activate()

    b.build(logic, notify=True)
    return results[0] if len(results) == 1 else tuple(results)
