"""A worker's side of the snapshot protocol (skeleton: restores nothing, saves nothing yet)."""

from __future__ import annotations

from typing import Any

__all__ = ["SnapshotManager", "attach"]


class SnapshotManager:
    """One worker's snapshot manager (attached with :func:`attach`)."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker

    def poll(self) -> bool:
        """Advance the protocol; True while a snapshot is under way."""
        return False

    def busy(self) -> bool:
        """Whether a snapshot is under way."""
        return False

    def built(self, graph: Any) -> None:
        """See a dataflow once it is built."""

    def restored(self, kept: Any) -> Any:
        """What the restored snapshot holds for ``kept`` on this worker (None: nothing)."""
        return None


def attach(worker: Any) -> SnapshotManager:
    """Install snapshots on ``worker`` (its config has a checkpoint); before the worker
    function runs."""
    manager = SnapshotManager(worker)
    worker.attach_snapshots(manager)
    return manager
