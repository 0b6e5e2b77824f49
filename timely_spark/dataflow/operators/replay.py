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

    def logic() -> None:
        if not state["started"]:
            state["started"] = True
            internals.update(minimum, len(sources) - 1)
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
                    if type(event) is Progress:
                        internals.extend(event.updates)
                    elif type(event) is Messages:
                        output.unstable_push(event.time, event.data)
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
