"""Cancelling a Spark job from the driver: on Ctrl-C, at a deadline, or by the caller's
own job group.

The block's jobs carry a job tag of their own (what Ctrl-C and the deadline cancel),
with task threads interrupted on cancel.  A caller that set a job group
(``sc.setJobGroup``) keeps it: cancelling that group (``sc.cancelJobGroup``, a
notebook's stop button) cancels the timely job too -- a long-running job can be
stopped from another thread that way.  Without one, the block runs in a job group
named for timely_spark (as it shows in Spark's UI).

Over Spark Connect (no SparkContext, no job groups) the same through the session's job
tags: the block's operations carry a tag of their own (``spark.addTag``), cancelled with
``spark.interruptTag``; a caller that tagged its operations (``spark.addTag`` before the
call) cancels the timely job with ``spark.interruptTag`` of its tag.
"""

from __future__ import annotations

import threading
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

from .connect import is_connect

__all__ = ["cancelled_on_interrupt_or_deadline", "caller_job_group"]


def caller_job_group(sc: Any) -> Optional[str]:
    """The job group the calling thread set (None: none) -- over Spark Connect (``sc``:
    the session), the tags it set, comma-separated."""
    if is_connect(sc):
        return ",".join(sorted(sc.getTags())) or None
    return sc.getLocalProperty("spark.jobGroup.id")


@contextmanager
def cancelled_on_interrupt_or_deadline(sc: Any, deadline: Optional[float]) -> Iterator[threading.Event]:
    """Run the block's Spark jobs under a job tag of their own, cancelled when the block
    is interrupted (KeyboardInterrupt, which is re-raised) or ``deadline`` seconds pass.
    Yields an Event that is set if the deadline cancelled the jobs.  (``sc``: a
    SparkContext, or a Spark Connect session.)"""
    tag = f"timely_spark-{uuid.uuid4().hex}"
    expired = threading.Event()
    cancel: Callable[[], Any]
    undo: Callable[[], Any]
    if is_connect(sc):
        sc.addTag(tag)
        cancel, undo = (lambda: sc.interruptTag(tag)), (lambda: sc.removeTag(tag))
    else:
        own_group = caller_job_group(sc) is None
        interrupt = sc.getLocalProperty("spark.job.interruptOnCancel")
        if own_group:
            sc.setJobGroup(tag, "timely_spark barrier job", interruptOnCancel=True)
        sc.addJobTag(tag)
        sc.setInterruptOnCancel(True)

        def undo() -> None:
            sc.removeJobTag(tag)
            sc.setLocalProperty("spark.job.interruptOnCancel", interrupt)
            if own_group:
                sc.setLocalProperty("spark.jobGroup.id", None)

        def cancel() -> None:
            sc.cancelJobsWithTag(tag)
    try:
        with _cancelled(cancel, deadline, expired):
            yield expired
    finally:
        undo()


@contextmanager
def _cancelled(cancel: Callable[[], Any], deadline: Optional[float], expired: threading.Event) -> Iterator[None]:
    """``cancel()`` when the block is interrupted (KeyboardInterrupt, re-raised) or, after
    setting ``expired``, when ``deadline`` seconds pass."""
    def on_deadline() -> None:
        expired.set()
        cancel()

    timer = threading.Timer(deadline, on_deadline) if deadline is not None else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        yield
    except KeyboardInterrupt:
        cancel()
        raise
    finally:
        if timer is not None:
            timer.cancel()
