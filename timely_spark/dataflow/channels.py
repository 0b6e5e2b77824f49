"""Parallelization contracts: how a batch ``(time, records)`` reaches the workers.

* :data:`Pipeline` -- stays on the worker that produced it;
* :class:`Exchange` ``(key)`` -- each record goes to worker ``key(record) % peers``;
* broadcast -- every worker gets every record (see ``Stream.broadcast``).

A pact turns the allocator's per-worker pushers into one *tee pusher*: a
function ``push(time, records)`` that the producing output calls once per batch.
Batches are shared, not copied: operators must not mutate the lists they receive.
"""

from __future__ import annotations

import zlib
from typing import Any, Callable, Optional, Sequence

from ..errors import OperatorError, WorkerAborted, WorkerFailure

__all__ = ["Pipeline", "Exchange", "Broadcast", "as_pact", "stable_hash", "PASS_THROUGH"]

#: Exceptions that are not the operator's fault: a pact's tee pusher lets them pass unwrapped.
PASS_THROUGH = (OperatorError, WorkerFailure, WorkerAborted)


class _Pipeline:
    def tee_pusher(self, pushers: Sequence[Any], index: int) -> Callable[[Any, list], None]:
        pusher = pushers[index]
        if hasattr(pusher, "pair_pusher"):      # this worker's own inbox: one call per batch
            return pusher.pair_pusher()
        push = pusher.push

        def pipeline(time: Any, data: list) -> None:
            push((time, data))

        return pipeline

    def __repr__(self) -> str:
        return "Pipeline"


Pipeline = _Pipeline()


class Exchange:
    """Route each record to worker ``key(record) % peers``.

    ``key`` must return an int that is the same on every worker for the same
    record; :func:`stable_hash` is such a function for common Python values.
    """

    #: The tee pusher raises its errors as the receiving operator's itself (``charged_to``).
    charges_errors = True

    def __init__(self, key: Callable[[Any], int]) -> None:
        self.key = key

    def tee_pusher(self, pushers: Sequence[Any], index: int,
                   charged_to: Optional[str] = None) -> Callable[[Any, list], None]:
        """One pusher for the producing output: each batch split by ``key(record) % peers``.
        ``charged_to``: the receiving operator's name, which an error of the key function (or of a
        pusher) is raised as an :class:`~timely_spark.errors.OperatorError` of (no wrapper: no
        Python call more a batch); the errors of :data:`PASS_THROUGH` pass as they are."""
        peers = len(pushers)
        if peers == 1:
            return _Pipeline().tee_pusher(pushers, index)
        key = self.key
        pushes = [p.push for p in pushers]

        def exchange(time: Any, data: list) -> None:
            try:
                if len(data) == 1:           # (one record: to its worker as it is, no buckets made)
                    pushes[key(data[0]) % peers]((time, data))
                    return
                buckets: list[list] = [[] for _ in range(peers)]
                appends = [b.append for b in buckets]
                for x in data:
                    appends[key(x) % peers](x)
                for push, bucket in zip(pushes, buckets):
                    if bucket:
                        push((time, bucket))
            except PASS_THROUGH:
                raise
            except Exception as exc:
                if charged_to is None:
                    raise
                raise OperatorError(charged_to, exc) from exc

        return exchange

    def __repr__(self) -> str:
        return f"Exchange({getattr(self.key, '__name__', self.key)!r})"


class Broadcast:
    """Every worker receives every batch.  Only ``Stream.broadcast`` uses it, as
    its output counts each record once per worker."""

    def tee_pusher(self, pushers: Sequence[Any], index: int) -> Callable[[Any, list], None]:
        """One pusher for the producing output: each batch to every worker."""
        pushes = [p.push for p in pushers]

        def broadcast(time: Any, data: list) -> None:
            message = (time, data)
            for push in pushes:
                push(message)

        return broadcast


def as_pact(pact: Optional[Any]) -> Any:
    """``None`` -> Pipeline; a callable -> Exchange(callable); a pact -> itself."""
    if pact is None:
        return Pipeline
    if hasattr(pact, "tee_pusher"):
        return pact
    if callable(pact):
        return Exchange(pact)
    raise TypeError(f"{pact!r} is not a pact (Pipeline, Exchange(key) or a key function)")


def stable_hash(value: Any) -> int:
    """A hash that is the same in every process (Python's ``hash`` of str is not).

    >>> stable_hash(7), stable_hash("a") == stable_hash("a"), stable_hash((1, "b")) >= 0
    (7, True, True)
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value if value >= 0 else -value
    if isinstance(value, str):
        return zlib.crc32(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return zlib.crc32(value)
    if isinstance(value, float):
        return stable_hash(value.hex())
    if isinstance(value, tuple):
        h = 0x345678
        for v in value:
            h = (h * 1000003) ^ stable_hash(v)
            h &= 0xFFFFFFFFFFFF
        return h
    if value is None:
        return 0
    import pickle

    return zlib.crc32(pickle.dumps(value, protocol=5))
