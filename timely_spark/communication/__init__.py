"""Moving numbered, framed payloads between worker indices on named channels.

Knows nothing of dataflows.  ``Allocator`` is the interface; ``ThreadAllocator``
joins the workers of one process.
"""

from .allocator import Allocator, Inbox
from .thread import ThreadAllocator, ThreadFabric

__all__ = ["Allocator", "Inbox", "ThreadAllocator", "ThreadFabric"]
