"""extract: a captured stream's data, grouped by time."""

from __future__ import annotations

from typing import Any, Iterable

from ..progress import sort_key
from .event import Messages

__all__ = ["extract"]


def extract(events: Iterable[Any]) -> list[tuple[Any, list]]:
    """``[(time, records), ...]`` in time order, the records of each time sorted when
    they can be (else in arrival order).

    >>> from timely_spark.capture import Messages, Progress
    >>> extract([Messages(1, ["b"]), Progress([(0, 1)]), Messages(0, ["z"]), Messages(1, ["a"])])
    [(0, ['z']), (1, ['a', 'b'])]
    """
    by_time: dict[Any, list] = {}
    for event in events:
        if isinstance(event, Messages):
            by_time.setdefault(event.time, []).extend(event.data)
    out = []
    for t in sorted(by_time, key=sort_key):
        data = by_time[t]
        try:
            data = sorted(data)
        except TypeError:
            pass
        out.append((t, data))
    return out
