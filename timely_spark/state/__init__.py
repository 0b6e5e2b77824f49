"""Snapshots of operator state at completed times, manifests, and restore.

A run with a ``checkpoint`` directory (``ts.execute(fn, checkpoint=DIR,
snapshot_every=SECONDS)``) snapshots the state every operator declared with
``OperatorBuilder.keep_state`` at completed times -- every ``snapshot_every``
seconds, and once when every worker's inputs are closed -- and a run started on a
checkpoint that holds a committed snapshot restores it first
(``worker.restored_time``).

* :func:`read_snapshot` -- a snapshot as a ``pyarrow.Table``, for debugging;
* :func:`attach` -- install snapshots on a worker (every way of running calls it
  when the run's Config has a checkpoint);
* :data:`KEY_HASH` -- the ``uint64`` key-hash column of keyed state;
* :class:`SnapshotManager` -- one worker's side of the protocol (see :mod:`.manager`).
"""

from __future__ import annotations

from ..dataflow.state_hook import KEY_HASH, KeptState, PinnableSource
from .manager import SnapshotManager, attach
from .reader import read_snapshot

__all__ = ["KEY_HASH", "KeptState", "PinnableSource", "SnapshotManager", "attach", "read_snapshot"]
