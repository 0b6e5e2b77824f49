"""What the dataflow layer knows of snapshots: the state an operator keeps, the
sources a snapshot pins, and the key-hash column of keyed state.

The snapshot protocol and restore live in :mod:`timely_spark.state`, above this
layer; it attaches itself to a worker (:meth:`~.worker.Worker.attach_snapshots`) and
the worker hands it what operators and sources register here.

* :data:`KEY_HASH` -- the ``uint64`` column of keyed state (``keep_state(..., keyed=True)``):
  per row, the hash the operator's exchange routes the row by (worker = hash % peers);
* :class:`KeptState` -- one operator's registration (``OperatorBuilder.keep_state``);
* :class:`PinnableSource` -- what a source registers with ``worker.register_source``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

__all__ = ["KEY_HASH", "KeptState", "PinnableSource"]

#: The column of keyed state holding each row's key hash (``uint64``); a restore into
#: M workers gives worker ``i`` the rows with ``hash % M == i``.
KEY_HASH = "_key_hash"


@dataclass
class KeptState:
    """One operator's declared state: ``save(t)`` gives it for the times before ``t``.

    ``dataflow`` is the worker's number of the dataflow, ``address`` the operator's
    address (a tuple), ``name`` its name, ``keyed`` whether ``save`` returns a Table
    with a :data:`KEY_HASH` column (re-sharded on restore), ``schema`` the Table's
    declared schema (checked on restore) or None.
    """

    dataflow: int
    address: tuple
    name: str
    save: Callable[[Any], Any]
    keyed: bool = False
    schema: Optional[Any] = None


class PinnableSource:
    """The interface a source registers with ``worker.register_source(obj)`` so that a
    snapshot can hold the dataflow at a time (an :class:`~.input.InputHandle` is one;
    capture's followers and replays are others).

    * ``time`` -- the source's current time (its time when it was closed, if closed);
    * ``closed`` -- whether the source sends no more (then it cannot be pinned);
    * ``resume_time`` -- for a closed source, the earliest time at or after which it
      sent nothing (a snapshot is taken at this time or later); for an open one, ``time``;
    * ``pin(t)`` -- keep a capability at ``t`` (``t`` >= ``time``, or ``t`` = ``time``
      to pin where it is; pinning again moves the pin later) until :meth:`unpin`,
      whatever the source does meanwhile (advance, close);
    * ``unpin()`` -- release the pin (idempotent).

    Optionally (an :class:`~.input.InputHandle` has them), so that the final snapshot,
    taken when every source is closed, holds the dataflow at its time like any other:

    * ``hold_when_closed()`` -- called once the dataflow is built: when closed, keep a
      capability at ``resume_time`` (``pin(t)`` moves it to ``t``) until ``release_hold()``;
    * ``holding`` -- whether the source is closed and keeps that capability (the
      snapshot pins it like an open one);
    * ``release_hold()`` -- give it up (after the final snapshot was saved).

    This class only documents the interface (duck typing is enough).
    """

    time: Any
    closed: bool
    resume_time: Any

    def pin(self, t: Any) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def unpin(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError
