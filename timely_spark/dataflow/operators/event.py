"""Events: what a captured stream shows -- data, and changes to its frontier.

The event model shared by the capture and replay operators (and by the event
writers and readers of :mod:`timely_spark.capture`).

* :class:`Messages` ``(time, data)`` -- a batch of records at ``time``;
* :class:`Progress` ``(updates)`` -- ``[(time, diff), ...]`` changes to the frontier.

An event *pusher* is anything with ``push(event)``; an event *source* has
``next()``, returning the next event, ``None`` when none is available yet, and
raising ``StopIteration`` once the stream has ended for good.  :func:`as_source`
adapts lists, iterators and queues.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterable, Iterator, NamedTuple, Optional, Union

__all__ = ["Messages", "Progress", "Event", "EventQueue", "as_source"]


class Messages(NamedTuple):
    """A batch of records at ``time``.

    >>> Messages(3, ["a", "b"]).time
    3
    """
    time: Any
    data: list


class Progress(NamedTuple):
    """Changes ``[(time, diff), ...]`` to a captured stream's frontier.

    >>> Progress([(0, -1), (1, 1)]).updates      # the frontier moves from 0 to 1
    [(0, -1), (1, 1)]
    """
    updates: list


Event = Union[Messages, Progress]


class EventQueue:
    """An in-process event link: ``push`` on one side, ``next`` / iteration on the other.

    ``close()`` marks the end: ``next()`` then raises StopIteration once drained.

    >>> q = EventQueue()
    >>> q.push(Messages(0, [1])); q.close()
    >>> len(q), q.next(), len(q)
    (1, Messages(time=0, data=[1]), 0)
    """

    def __init__(self) -> None:
        self._events: deque = deque()
        self.closed = False

    def push(self, event: Event) -> None:
        """Append an event.

        >>> q = EventQueue(); q.push(Progress([(0, 1)])); list(q)
        [Progress(updates=[(0, 1)])]
        """
        self._events.append(event)

    def close(self) -> None:
        """Mark the end: once drained, ``next()`` raises StopIteration.

        >>> q = EventQueue(); q.close(); q.closed
        True
        """
        self.closed = True

    def next(self) -> Optional[Event]:
        """The next event, None if none is waiting, StopIteration once closed and drained.

        >>> q = EventQueue()
        >>> print(q.next())               # nothing yet, but not ended
        None
        >>> q.close(); q.next()
        Traceback (most recent call last):
        StopIteration
        """
        if self._events:
            return self._events.popleft()
        if self.closed:
            raise StopIteration
        return None

    def __iter__(self) -> Iterator[Event]:
        """The events available now (without consuming them)."""
        return iter(list(self._events))

    def __len__(self) -> int:
        return len(self._events)


class _IterSource:
    def __init__(self, events: Iterable[Event]) -> None:
        self._it = iter(events)

    def next(self) -> Optional[Event]:
        return next(self._it)


def as_source(source: Any) -> Any:
    """Something with ``next()`` as above, from an event source, a list or an iterator
    (a list or an iterator ends when exhausted; an event source is returned as it is).

    >>> source = as_source([Messages(0, ["a"])])
    >>> source.next()
    Messages(time=0, data=['a'])
    >>> source.next()
    Traceback (most recent call last):
    StopIteration
    >>> q = EventQueue(); as_source(q) is q
    True
    """
    if hasattr(source, "next") and callable(source.next):
        return source
    return _IterSource(source)
