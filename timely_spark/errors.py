"""Exceptions that timely_spark raises to its users."""

from __future__ import annotations

import traceback
from typing import Optional

__all__ = ["TimelyError", "BuildError", "CycleError", "CapabilityError", "OperatorError", "WorkerError",
           "WorkerFailure", "RunTimeout", "ParameterError", "operator_of", "most_telling", "picklable"]


class TimelyError(Exception):
    """Base class of timely_spark's own errors."""


class BuildError(TimelyError, ValueError):
    """A mistake while building a dataflow: a stream from another scope, a feedback
    handle never connected, a summary that does not advance, an operator added to a
    scope that is already built.  The message names the scope or operator."""


class ParameterError(TimelyError, ValueError):
    """A parameter of a public function has a value it does not take; ``parameter``
    names it as the caller wrote it, and the message says what is accepted."""

    def __init__(self, message: str, parameter: str = "") -> None:
        super().__init__(message)
        self.parameter = parameter

    def __reduce__(self):
        return (ParameterError, (str(self), self.parameter))


class CycleError(BuildError):
    """A cycle in a dataflow that does not strictly advance time (so it could not end).

    ``cycle`` lists the locations on the cycle, by name.
    """

    def __init__(self, cycle: list) -> None:
        self.cycle = list(cycle)
        super().__init__(
            "the dataflow has a cycle that does not strictly advance the timestamp "
            "(every cycle must pass through a feedback edge with an advancing summary): "
            + " -> ".join(map(str, self.cycle)))


class CapabilityError(TimelyError, ValueError):
    """A capability used against the rules: backwards in time, after it was
    dropped, or by an operator that does not own it.  The message names the operator."""


class OperatorError(TimelyError):
    """An exception raised inside an operator's logic, with the operator it came from.

    ``operator`` is the operator's name and ``cause`` the original exception (also
    ``__cause__``).  :class:`WorkerError` unwraps it, so callers of ``execute`` see the
    original exception type and message, with the operator named.
    """

    def __init__(self, operator: str, cause: BaseException) -> None:
        self.operator = operator
        self.cause = cause
        super().__init__(f"operator {operator!r} failed: {type(cause).__name__}: {cause}")

    def __reduce__(self):
        return (OperatorError, (self.operator, self.cause))


class WorkerError(TimelyError):
    """An exception raised by user code (or an operator) on some worker.

    ``worker`` is the worker's index, ``operator`` the operator's name when the
    error came from one, ``cause`` the original exception (also ``__cause__``) and
    ``remote_traceback`` its formatted traceback.
    """

    def __init__(self, worker: int, cause: BaseException, operator: Optional[str] = None,
                 remote_traceback: Optional[str] = None) -> None:
        if isinstance(cause, OperatorError):
            operator = operator or cause.operator
            cause = cause.cause
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


class RunTimeout(TimelyError, TimeoutError):
    """A run did not finish within its ``timeout``: every worker was stopped.

    ``timeout`` is the bound in seconds and ``incomplete`` maps each worker that had
    not finished to what it was still doing (its dataflows and the times they held).
    """

    def __init__(self, timeout: float, incomplete: dict) -> None:
        self.timeout = timeout
        self.incomplete = dict(incomplete)
        lines = "".join(f"\n  worker {w}: {what}" for w, what in sorted(self.incomplete.items()))
        super().__init__(f"the run did not finish within its timeout of {timeout} s; still incomplete:"
                         + (lines or " (no worker reported)"))

    def __reduce__(self):
        return (RunTimeout, (self.timeout, self.incomplete))


class WorkerAborted(TimelyError):
    """Raised inside a worker when another worker has failed (not shown to users)."""


def operator_of(exc: BaseException) -> Optional[str]:
    """The name of the operator an exception was raised in, if it came from one."""
    return exc.operator if isinstance(exc, (OperatorError, WorkerError)) else None


def picklable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling (to cross a process boundary), else a
    :class:`WorkerFailure` carrying its type and message."""
    import pickle

    try:
        pickle.loads(pickle.dumps(exc, protocol=5))
        return exc
    except Exception:
        return WorkerFailure(f"{type(exc).__name__}: {exc}")


def most_telling(errors: list) -> BaseException:
    """Of the errors a failed run produced, the one to show: a worker's own error
    beats the failures it caused elsewhere; run timeouts from several processes are
    merged into one."""
    for e in errors:
        if isinstance(e, WorkerError):
            return e
    timeouts = [e for e in errors if isinstance(e, RunTimeout)]
    if timeouts:                        # each process says what its own workers were doing
        merged: dict = {}
        for e in timeouts:
            merged.update(e.incomplete)
        return RunTimeout(timeouts[0].timeout, merged)
    return errors[0]
