"""Synchronization built from timely dataflows (no separate coordination service):
``Barrier(worker).wait()`` and ``Sequencer(worker).push(x) / .next()``."""

from .barrier import Barrier
from .sequencer import Sequencer

__all__ = ["Barrier", "Sequencer"]
