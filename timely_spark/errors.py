"""Exceptions that timely_spark raises to its users."""

from __future__ import annotations

import traceback
from typing import Optional

__all__ = ["TimelyError", "CapabilityError", "WorkerError", "WorkerFailure", "operator_of", "most_telling"]


class TimelyError(Exception):
    """Base class of timely_spark's own errors."""


class CapabilityError(TimelyError, ValueError):
    """A capability used against the rules: backwards in time, after it was
    dropped, or by an operator that does not own it.  The message names the operator."""


class WorkerError(TimelyError):
    """An exception raised by user code (or an operator) on some worker.

    ``worker`` is the worker's index, ``operator`` the operator's name when the
    error came from one, ``cause`` the original exception (also ``__cause__``) and
    ``remote_traceback`` its formatted traceback.
    """

    def __init__(self, worker: int, cause: BaseException, operator: Optional[str] = None,
                 remote_traceback: Optional[str] = None) -> None:
        self.worker = worker
        self.operator = operator
        self.cause = cause
        self.remote_traceback = remote_traceback or "".join(
            traceback.format_exception(type(cause), cause, cause.__traceback__))
        where = f"worker {worker}" + (f", operator {operator!r}" if operator else "")
        super().__init__(f"{where} failed: {type(cause).__name__}: {cause}\n\n"
                         f"Original traceback:\n{self.remote_traceback}")

    def __reduce__(self):
        return (WorkerError, (self.worker, self.cause, self.operator, self.remote_traceback))


class WorkerFailure(TimelyError):
    """A peer died, closed its connections or went silent: the run cannot go on."""


class WorkerAborted(TimelyError):
    """Raised inside a worker when another worker has failed (not shown to users)."""


def operator_of(exc: BaseException) -> Optional[str]:
    """The name of the operator an exception was raised in, if the engine noted it."""
    return getattr(exc, "_timely_operator", None)


def most_telling(errors: list) -> BaseException:
    """Of the errors a failed run produced, the one to show: a worker's own error
    beats the failures it caused elsewhere."""
    for e in errors:
        if isinstance(e, WorkerError):
            return e
    return errors[0]
