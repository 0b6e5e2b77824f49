"""replay_into: rebuild a stream from any number of captured event streams.

The replay operator starts with one capability per source stream (on top of the
one per worker every operator starts with, it adds ``len(sources) - 1``), then
plays events out as they become available: progress events change its capability
counts, message events are sent as they are.  Any interleaving of valid streams is
a valid stream, so any number of captured streams replay into any number of
workers (each source replayed by one worker).  Sources are polled with a short,
growing back-off while nothing arrives, never spun on.

>>> import timely_spark as ts
>>> events = ts.example(lambda s: s.to_stream("ab").capture())
>>> _ = ts.example(lambda s: ts.capture.replay_into([events], s).inspect_time(lambda t, x: print(t, x)))
0 a
0 b
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ...progress import MutableAntichain, less_equal
from ..operator import OperatorBuilder
from .event import Messages, Progress, as_source

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["replay_into"]

POLL_MIN, POLL_MAX = 0.0005, 0.05


def replay_into(sources: Sequence[Any], scope: Any, name: str = "Replay") -> "Stream":
    """A stream in ``scope`` that replays the captured event ``sources`` (each an event
    source, a list or an iterator of events); see the module docstring.  The stream
    is complete once every source has ended and released its times.

    >>> import timely_spark as ts
    >>> first = ts.example(lambda s: s.to_stream([1]).capture())
    >>> later = ts.example(lambda s: s.to_stream([2]).delay(lambda x, t: 5).capture())
    >>> _ = ts.example(lambda s: replay_into([first, later], s).inspect_time(lambda t, x: print(t, x)))
    0 1
    5 2
    """
    sources = [as_source(s) for s in sources]
    b = OperatorBuilder(scope, name)
    output, stream = b.new_output()
    internals = b.unstable_capability_changes(0)
    minimum = scope.minimum
    info = b.info()
    activate = info.activate
    state: dict[str, Any] = {"started": False, "live": list(sources), "delay": POLL_MIN}
    since = _restored_at(scope)
    held = _Held(minimum if since is None else since, len(sources), internals, activate, state)
    if scope.subgraph.parent is None and not all(hasattr(x, "pin") for x in sources):
        scope.worker.register_source(held)        # a snapshot holds the replay at its time too

    def logic() -> None:
        if not state["started"]:
            state["started"] = True
            if since is None:
                internals.update(minimum, len(sources) - 1)
            else:
                internals.update(minimum, -1)
                internals.update(since, len(sources))
        got = False
        live = []
        for source in state["live"]:
            try:
                while True:
                    event = source.next()
                    if event is None:
                        live.append(source)
                        break
                    got = True
                    if since is not None:
                        event = _advanced(event, since)
                        if event is None:
                            continue
                    if type(event) is Progress:
                        internals.extend(event.updates)
                        held.counts.update_iter(event.updates)
                    elif type(event) is Messages:
                        output.unstable_push(event.time, event.data)
                        held.sent(event.time)
                    else:
                        raise TypeError(f"replay {name!r}: {type(event).__name__} is not an event")
            except StopIteration:
                pass
        state["live"] = live
        if live:
            if got:
                state["delay"] = POLL_MIN
                activate()
            else:
                info.activate_after(state["delay"])
                state["delay"] = min(state["delay"] * 2, POLL_MAX)

    b.build(logic)
    return stream


def _restored_at(scope: Any) -> Any:
    """The time a restored snapshot holds the dataflow at (None: a fresh start, or not a
    dataflow's top scope): the replay then starts there, as the dataflow's state holds
    everything before it."""
    if scope.subgraph.parent is not None:
        return None
    of = getattr(scope.worker, "restored_time_of", None)
    return of(scope) if of is not None else None


def _advanced(event: Any, since: Any) -> Any:
    """``event`` of a stream replayed from ``since`` on (a restored run): records at times
    before it dropped (None), progress at such times counted at ``since`` instead."""
    if type(event) is Messages:
        return event if less_equal(since, event.time) else None
    if type(event) is Progress:
        return Progress([(t if less_equal(since, t) else since, d) for t, d in event.updates])
    return event


class _Held:
    """The replay as a source a snapshot pins (``worker.register_source``): its time is the
    least time it still holds, ``pin(t)`` keeps a capability at ``t`` (through the
    operator's capability changes) until ``unpin()``."""

    def __init__(self, start: Any, n: int, internals: Any, activate: Any, state: dict) -> None:
        self.counts = MutableAntichain([(start, n)])
        self._last = start                 # the least time held when it last held one
        self._latest: Any = None           # the latest time it sent records at
        self._internals, self._activate, self._state = internals, activate, state
        self._pinned: Any = None

    def sent(self, t: Any) -> None:
        if self._latest is None or less_equal(self._latest, t):
            self._latest = t

    @property
    def time(self) -> Any:
        elements = self.counts.frontier().elements()
        if elements:
            self._last = min(elements)
        return self._last

    @property
    def closed(self) -> bool:
        return bool(self._state["started"]) and not self._state["live"]

    @property
    def resume_time(self) -> Any:
        t = self.time
        if self.closed and isinstance(self._latest, int) and self._latest >= t:
            return self._latest + 1
        return t

    def pin(self, t: Any) -> None:
        self._internals.update(t, 1)
        if self._pinned is not None:
            self._internals.update(self._pinned, -1)
        self._pinned = t
        self._activate()

    def unpin(self) -> None:
        if self._pinned is not None:
            self._internals.update(self._pinned, -1)
            self._pinned = None
            self._activate()
