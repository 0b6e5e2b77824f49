"""Cancelling a Spark job from the driver: on Ctrl-C, and at a deadline."""

from __future__ import annotations

import threading
import uuid
from contextlib import contextmanager
from typing import Any, Iterator, Optional

__all__ = ["cancelled_on_interrupt_or_deadline"]


@contextmanager
def cancelled_on_interrupt_or_deadline(sc: Any, deadline: Optional[float]) -> Iterator[threading.Event]:
    """Run the block's Spark jobs in a job group of their own, cancelled when the block
    is interrupted (KeyboardInterrupt, which is re-raised) or ``deadline`` seconds pass.
    Yields an Event that is set if the deadline cancelled the jobs."""
    group = f"timely_spark-{uuid.uuid4().hex}"
    expired = threading.Event()

    def cancel() -> None:
        expired.set()
        sc.cancelJobGroup(group)

    timer = threading.Timer(deadline, cancel) if deadline is not None else None
    sc.setJobGroup(group, "timely_spark barrier job", interruptOnCancel=True)
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        yield expired
    except KeyboardInterrupt:
        sc.cancelJobGroup(group)
        raise
    finally:
        if timer is not None:
            timer.cancel()
        sc.setLocalProperty("spark.jobGroup.id", None)
