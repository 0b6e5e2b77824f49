"""Exceptions that timely_spark raises to its users."""

from __future__ import annotations

import builtins
import json
import traceback
from typing import Any, Optional

__all__ = [
    # the root, and errors of building and running dataflows
    "TimelyError", "BuildError", "CapabilityError", "CycleError", "OperatorError", "ParameterError", "RunTimeout",
    "WorkerError", "WorkerFailure",
    # errors of the wires, Spark, event logs, changelogs, aggregates, windows, graphs and snapshots
    "AggregateOverflow", "ChangelogError", "CheckpointError", "EventLogError", "EventStreamError",
    "FrameLimitReached", "GraphInputError", "RemoteError", "RendezvousError", "RestoreError", "SchemaMismatch",
    "SparkJobError", "SparkMemoryError", "SparkSetupError", "WindowError",
    # errors as data across processes (the rendezvous, worker processes)
    "ReportedError", "describe_error", "most_telling", "operator_of", "picklable", "rebuild_error", "type_name",
]


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
        super().__init__(f"{where} failed: {type_name(cause)}: {cause}\n\n"
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


class RemoteError(TimelyError):
    """An exception raised in another process whose type is not rebuilt here: from a
    task's report (see :func:`rebuild_error`) the driver rebuilds only builtin
    exceptions and the package's own errors.  ``type_name`` and ``module`` name the
    original type; the message is the original's.

    >>> str(WorkerError(2, RemoteError("ParseError", "mylib", "bad line 7"), "Map", "...")).splitlines()[0]
    "worker 2, operator 'Map' failed: ParseError: bad line 7"
    """

    def __init__(self, type_name: str, module: str, message: str) -> None:
        self.type_name = type_name
        self.module = module
        super().__init__(message)

    def __reduce__(self):
        return (RemoteError, (self.type_name, self.module, str(self)))


class ReportedError(TimelyError):
    """What a Spark task raises for an error it has reported to the driver: the text
    leads with the job's marker, by which the driver finds the report and raises the
    error itself; the rest repeats the error for Spark's own logs."""


class EventLogError(TimelyError):
    """A file or directory that is not (a valid part of) the expected event log, or a
    record an event log cannot keep as it is.  The message names the file (or the
    writer's directory), and for a record the column, the time and the value."""


class SchemaMismatch(TimelyError, ValueError):
    """The output of ``transform`` does not fit its schema (a column or a nested field
    missing or extra, or a value of a type that cannot be cast without changing it);
    the message names the worker and the column's path."""


class RendezvousError(TimelyError):
    """Tasks could not meet through the driver (unreachable, refused, or not all
    tasks registered in time)."""


class SparkJobError(TimelyError):
    """The barrier job itself failed (a task or executor died, Spark gave up)."""


class SparkMemoryError(SparkJobError, MemoryError):
    """Spark ran out of memory (a ``java.lang.OutOfMemoryError``) or refused a result
    larger than ``spark.driver.maxResultSize``: the message says what to do (write the
    result with the DataFrame writer, or the settings to raise)."""


class SparkSetupError(TimelyError):
    """The Spark session cannot run timely workers as asked (and why)."""


class EventStreamError(TimelyError):
    """A frame that fails its HMAC, or a stream that is not an event stream."""


class GraphInputError(TimelyError, ValueError):
    """Bad graph input; ``what`` names the column or value at fault."""

    def __init__(self, message: str, what: str = "") -> None:
        super().__init__(message)
        self.what = what


class ChangelogError(TimelyError, ValueError):
    """A changelog that breaks its convention: a ``diff`` column that is not an
    integer or holds nulls, or a withdrawal (diff -1) of a row the collection does not
    hold.  The message names the operator and, where known, the time and the row."""


class WindowError(TimelyError, ValueError):
    """Rows that an event-time window operator (``group_by_window``) cannot place: a
    time column that is not a timestamp or an integer, or that holds nulls, or a
    logical time the declared ``epoch`` cannot turn into an event time.  The message
    names the operator, the column and, where known, the logical time."""


class AggregateOverflow(TimelyError, OverflowError):
    """An integer aggregate (a sum, or a count of rows kept by ``diff`` s) that would not
    fit an int64 -- raised instead of a wrapped number (as Spark's ANSI mode does).  The
    message names the operator, the column, the key and, where known, the time."""


class FrameLimitReached(WorkerFailure):
    """A connection sealed as many frames in one direction as one key may
    (:data:`~timely_spark.communication.aead.MAX_FRAMES_PER_KEY`): it closes rather than reuse a
    nonce.  The message names the peer."""


class WorkerAborted(TimelyError):
    """Raised inside a worker when another worker has failed (not shown to users)."""


# ---- snapshots and recovery -----------------------------------------------------------------
class CheckpointError(TimelyError):
    """A checkpoint directory or snapshot that cannot be used: a damaged manifest or
    state file with no older committed snapshot to fall back to, a checkpoint written
    by another dataflow (other operators, names, state kinds or schemas), a dataflow
    that cannot be checkpointed.  The message names the file (or operator) and what
    differs."""


class RestoreError(CheckpointError):
    """State in a snapshot that cannot be restored into this run, e.g. an operator's
    unkeyed state into another worker count.  The message names the operator."""


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


def type_name(exc: BaseException) -> str:
    """The name of ``exc``'s type -- for a :class:`RemoteError`, the original type's."""
    return exc.type_name if isinstance(exc, RemoteError) else type(exc).__name__


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars] + " ... (cut)"


def _tail(text: str, chars: int) -> str:
    return text if len(text) <= chars else "(cut) ... " + text[-chars:]


def _json_value(value: Any, chars: int) -> bool:
    """Whether ``value`` is plain JSON data (that comes back equal) of at most ``chars``."""
    try:
        encoded = json.dumps(value)
    except (TypeError, ValueError):
        return False
    return len(encoded) <= chars and json.loads(encoded) == value


def describe_error(exc: BaseException, chars: int = 4000, depth: int = 3) -> dict:
    """Exception ``exc`` as plain JSON data, for :func:`rebuild_error` in another process
    (which must never unpickle what it receives): its type's name and module, message,
    arguments and attributes when they are plain data, and for the package's errors
    their worker, operator, traceback text and cause.  Texts are cut to ``chars``
    characters (tracebacks keep their end); causes nest ``depth`` deep.

    >>> describe_error(KeyError("x"))
    {'type': 'KeyError', 'module': 'builtins', 'message': "'x'", 'args': ['x']}
    """
    kind = type(exc)
    name, module = (exc.type_name, exc.module) if isinstance(exc, RemoteError) else (kind.__qualname__,
                                                                                    kind.__module__)
    report: dict = {"type": name, "module": module, "message": _cut(str(exc), chars)}
    if isinstance(exc, RemoteError):
        return report
    if isinstance(exc, (WorkerError, OperatorError)):
        report["operator"] = exc.operator
        if depth > 1:
            report["cause"] = describe_error(exc.cause, chars, depth - 1)
        if isinstance(exc, WorkerError):
            report.update(worker=exc.worker, traceback=_tail(exc.remote_traceback, chars))
        return report
    if isinstance(exc, RunTimeout):
        report.update(timeout=exc.timeout, incomplete=[[w, _cut(str(what), chars)]
                                                       for w, what in sorted(exc.incomplete.items())])
        return report
    if _json_value(list(exc.args), chars):
        report["args"] = list(exc.args)
    attributes, left = {}, chars
    for key, value in vars(exc).items():
        if key.isidentifier() and not key.startswith("_") and _json_value(value, left):
            attributes[key] = value
            left -= len(json.dumps(value))
    if attributes:
        report["attributes"] = attributes
    return report


def _rebuildable(module: str, name: str) -> Optional[type[BaseException]]:
    """The allow-listed exception type ``module.name``: a builtin exception, or one of
    the package's own errors (looked up among the loaded subclasses of TimelyError --
    nothing is imported by name)."""
    if module == "builtins":
        found = getattr(builtins, name, None)
        return found if isinstance(found, type) and issubclass(found, Exception) else None
    if module != "timely_spark" and not module.startswith("timely_spark."):
        return None
    pending: list[type[BaseException]] = [TimelyError]
    while pending:
        cls = pending.pop()
        if cls.__module__ == module and cls.__qualname__ == name:
            return cls
        pending.extend(cls.__subclasses__())
    return None


def rebuild_error(report: Any, depth: int = 3) -> BaseException:
    """The exception :func:`describe_error` described: its own type when that is a
    builtin exception or one of the package's errors (made from the report's data; no
    code from the report runs), else :class:`RemoteError` carrying the type's name and
    the message.  A malformed report gives a RemoteError saying so.

    >>> err = rebuild_error(describe_error(WorkerError(1, ZeroDivisionError("division by zero"), "Map", "tb")))
    >>> type(err).__name__, err.worker, err.operator, type(err.cause).__name__, str(err.cause)
    ('WorkerError', 1, 'Map', 'ZeroDivisionError', 'division by zero')
    >>> other = rebuild_error({"type": "system", "module": "os", "message": "not run"})
    >>> type(other).__name__, other.type_name, other.module, str(other)
    ('RemoteError', 'system', 'os', 'not run')
    """
    try:
        name, module, message = str(report["type"]), str(report["module"]), str(report["message"])
    except (TypeError, KeyError) as exc:
        return RemoteError("?", "?", f"a malformed error report ({exc!r})")
    try:
        cls = _rebuildable(module, name)
        if cls is None:
            return RemoteError(name, module, message)
        if issubclass(cls, (WorkerError, OperatorError)):
            cause = report.get("cause")
            inner = (rebuild_error(cause, depth - 1) if cause is not None and depth > 1
                     else RemoteError("?", "?", "(cause not reported)"))
            operator = None if report.get("operator") is None else str(report["operator"])
            if issubclass(cls, WorkerError):
                return WorkerError(int(report["worker"]), inner, operator, str(report["traceback"]))
            return OperatorError(str(operator), inner)
        if issubclass(cls, RunTimeout):
            return RunTimeout(float(report["timeout"]), {int(w): str(what) for w, what in report["incomplete"]})
        args = report.get("args")
        rebuilt = cls.__new__(cls, *(args if isinstance(args, list) else [message]))
        attributes = report.get("attributes")
        if isinstance(attributes, dict):       # plain data into the instance's dict: no setter runs
            rebuilt.__dict__.update({k: v for k, v in attributes.items()
                                     if isinstance(k, str) and k.isidentifier() and not k.startswith("_")})
        if str(rebuilt) != message:
            return RemoteError(name, module, message)
        return rebuilt
    except Exception as exc:  # data that does not fit the type: keep what can be said
        return RemoteError(name, module, f"{message} (not rebuilt: {exc!r})")
