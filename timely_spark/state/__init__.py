"""Snapshots of operator state at completed times, manifests, and restore (issue 24).

A run with a ``checkpoint`` directory (``ts.execute(fn, checkpoint=DIR,
snapshot_every=SECONDS)``) snapshots the state every operator declared with
``OperatorBuilder.keep_state`` at completed times, and a run started on a checkpoint
that holds a committed snapshot restores it (``worker.restored_time``).

* :func:`attach` -- install snapshots on a worker (every way of running calls it when
  the run's Config has a checkpoint);
* :data:`KEY_HASH` -- the ``uint64`` key-hash column of keyed state.
"""

from __future__ import annotations

from ..dataflow.state_hook import KEY_HASH, KeptState
from .manager import SnapshotManager, attach

__all__ = ["KEY_HASH", "KeptState", "SnapshotManager", "attach"]
