"""A checkpoint directory belongs to one run at a time (see
:mod:`timely_spark.capture.owner_lock`): held where the run starts -- the calling process
of ``ts.execute``, process 0 of processes started by hand, the Spark driver across all
of ``ts.spark.run``'s attempts -- so a job submitted twice, or a restart while the old
attempt still runs, is refused at start, naming the directory and the run holding it."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, ContextManager

from ..capture.owner_lock import OwnerLock
from ..errors import CheckpointError

__all__ = ["owning_checkpoint"]


def owning_checkpoint(config: Any) -> ContextManager:
    """Hold ``config.checkpoint`` for the run (a context manager; nothing without a
    checkpoint, or on a process started by hand other than process 0);
    :class:`CheckpointError` naming the directory and the other run if one holds it.

    >>> import tempfile, timely_spark as ts
    >>> config = ts.Config(checkpoint=tempfile.mkdtemp())
    >>> with owning_checkpoint(config):
    ...     try:
    ...         owning_checkpoint(config)
    ...     except CheckpointError as exc:
    ...         print("in use by run" in str(exc))
    True
    """
    if config.checkpoint is None or config.process not in (None, 0):
        return nullcontext()
    return OwnerLock(config.checkpoint, "the checkpoint directory", CheckpointError)
