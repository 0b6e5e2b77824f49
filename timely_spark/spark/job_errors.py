"""Spark's errors of timely jobs, turned back into the package's own.

When a barrier task fails, Spark reports a ``Py4JJavaError`` of several kilobytes
with the Python cause somewhere inside.  Tasks of a job with a rendezvous ticket
report their error to the driver as data (see :mod:`.rendezvous`) and raise an error
naming the job attempt; :func:`timely_cause` finds the job attempt a Spark error names
and raises that attempt's most telling reported error, or recognizes an executor that
cannot import the package.

:func:`install` adds this translation to every Spark call of the driver, the way
PySpark itself turns Java errors into Python ones (by wrapping py4j's
``get_return_value``): an action on a ``transform`` result that fails in a worker
raises ``WorkerError`` (or ``SchemaMismatch``...), and a read or a streaming query of a
damaged event log ``EventLogError``, each with Spark's error as its ``__cause__`` (a
``SparkSetupError`` keeps it out of sight: see :func:`chained`).
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any, Callable, Optional

from ..capture.parquet import EventLogError
from ..errors import SparkMemoryError
from .connect import conf_get
from .connect import install_error_translation as install_connect_translation
from .preflight import SparkSetupError
from .rendezvous import reported_failure

__all__ = ["install", "timely_cause", "chained", "spark_summary", "memory_error", "SHIPPING_DOCS", "SparkMemoryError"]

log = logging.getLogger(__name__)

SHIPPING_DOCS = "docs/running.md, section 'Shipping the package to a cluster'"

# The line a Python traceback ends with: ``[module.]EventLogError: message`` at the start of a
# line (source lines and their comments are indented in a traceback, so never match), or
# quoted after Spark's exception name (``PythonException: 'timely_spark.errors.EventLogError: ...'``).
_EVENT_LOG = re.compile(r"^(?:.*?: (')|)(?:[A-Za-z_]\w*\.)*EventLogError: (.+?)(?(1)'|)$", re.M)
_MISSING = re.compile(r"No module named '(timely_spark)(\.[\w.]+)?'")
_RESULT_SIZE = re.compile(r"Total size of serialized results of (\d+) tasks \(([^)]*)\) is bigger than "
                          r"(?:spark\.driver\.)?maxResultSize \(([^)]*)\)")
_OUT_OF_MEMORY = re.compile(r"java\.lang\.OutOfMemoryError(?:: ([^\n]*))?")
_WRITE_IT = ("write it with the DataFrame writer instead of collecting it (df.write.parquet(path): each executor "
             "writes its own partitions and the driver holds nothing)")
_JVM_PACKAGES = ("org.", "java.", "scala.")
_JAVA_ERROR = re.compile(r"^:?\s*((?:org|java|scala)\.[\w.$]+): (.+)$")
_PYTHON_ERROR = re.compile(r"^(\w+(?:\.\w+)*(?:Error|Exception|Interrupt|Failure|Mismatch|Timeout)\b.*)$", re.M)


def _executor_python() -> str:
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    for key in ("spark.pyspark.python", "spark.executorEnv.PYSPARK_PYTHON"):
        value = conf_get(spark, key) if spark is not None else None
        if value:
            return value
    return os.environ.get("PYSPARK_PYTHON", "python3")


def timely_cause(exc: BaseException) -> Optional[BaseException]:
    """The package's own error behind Spark error ``exc``: a failure a task of this
    driver reported, the ``EventLogError`` a read of the ``"timely"`` data source raised
    (in Spark's planner, on an executor, or in a streaming query), or ``SparkSetupError``
    if executors cannot import timely_spark; None if ``exc`` is about something else."""
    text = str(exc)
    memory = memory_error(text)
    if memory is not None:
        return memory
    reported = reported_failure(text)     # Spark shows one task's error; its job attempt's most telling wins
    if reported is not None:
        return reported
    logged = _EVENT_LOG.findall(text)     # the last: the error the traceback ends with
    if logged:
        return EventLogError(logged[-1][1].strip())
    missing = _MISSING.search(text)
    if missing:
        return SparkSetupError(
            f"the executors cannot import timely_spark ({missing.group(0)}; executor Python: "
            f"{_executor_python()}): ship it with the job -- a packed virtual environment through --archives "
            f"and spark.pyspark.python, or a .zip of the package through --py-files; see {SHIPPING_DOCS}")
    return None


def memory_error(text: str) -> Optional[SparkMemoryError]:
    """The package's error for Spark error text ``text`` that says a result does not fit
    ``spark.driver.maxResultSize`` or a JVM ran out of memory (None otherwise), in its
    words: how large, and what to do.

    >>> print(memory_error("Job aborted due to stage failure: Total size of serialized results of 2 tasks "
    ...                    "(1030.5 KiB) is bigger than spark.driver.maxResultSize (1024.0 KiB)"))
    ... # doctest: +ELLIPSIS
    the result is larger than spark.driver.maxResultSize (1024.0 KiB): 1030.5 KiB in the 2 task ... write it ...
    """
    size = _RESULT_SIZE.search(text)
    if size is not None:
        tasks, got, limit = size.groups()
        return SparkMemoryError(
            f"the result is larger than spark.driver.maxResultSize ({limit}): {got} in the {tasks} task results "
            f"fetched when Spark gave up -- {_WRITE_IT}; or, to collect it, raise spark.driver.maxResultSize "
            "above the result's size and spark.driver.memory to several times it (the driver holds a few copies "
            "while it fetches and converts it), when the session is built")
    oom = _OUT_OF_MEMORY.search(text)
    if oom is not None:
        return SparkMemoryError(
            f"Spark ran out of memory (java.lang.OutOfMemoryError: {oom.group(1) or 'no detail'}): a result "
            f"collected to the driver (collect, toArrow, toPandas) needs a driver heap of several times its size "
            f"-- {_WRITE_IT}; or raise spark.driver.memory (spark.executor.memory if an executor ran out: see "
            "Spark's error, this error's __cause__) when the session is built")
    return None


def chained(error: BaseException, spark_error: BaseException) -> BaseException:
    """``error`` with Spark's error as its ``__cause__`` -- except a ``SparkSetupError``,
    which says all there is to fix: printed, Spark's error would put a hundred lines of
    Java before it, so it is only its ``__context__`` (reachable, not printed).  Spark's
    error also goes to this module's debug log."""
    error.__suppress_context__ = True
    log.debug("Spark's error behind %s: %s", type(error).__name__, spark_error)
    if isinstance(error, SparkSetupError):
        error.__cause__, error.__context__ = None, spark_error
    else:
        error.__cause__ = spark_error
    return error


def spark_summary(exc: BaseException, java_lines: int = 3) -> str:
    """Spark error ``exc`` in a few lines, the cause first: the last Python exception
    line in its text, else the innermost Java exception's message; then at most
    ``java_lines`` lines of Java."""
    text = str(exc)
    lines = [line for line in text.splitlines()
             if line.strip() and not line.startswith(("\tat ", "  ", "\t...", "An error occurred while calling"))]
    python = [m.group(1) for m in _PYTHON_ERROR.finditer(text) if not m.group(1).startswith(_JVM_PACKAGES)]
    java = [m.group(2) for m in map(_JAVA_ERROR.match, lines) if m]
    cause = python[-1] if python else (java[-1] if java else "")
    shown = lines[:java_lines] + (["..."] if len(lines) > java_lines else [])
    return "\n".join(([cause] if cause else []) + shown)


def _from_spark(exc: BaseException) -> bool:
    """Whether ``exc`` is a Java error reported through py4j (raw or as PySpark wrapped it)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import CapturedException

    return isinstance(exc, (Py4JJavaError, CapturedException))


def _translating(original: Callable[..., Any]) -> Callable[..., Any]:
    def get_return_value(*args: Any, **kwargs: Any) -> Any:
        try:
            return original(*args, **kwargs)
        except Exception as exc:
            cause = timely_cause(exc) if _from_spark(exc) else None
            if cause is None:
                raise
            raise chained(cause, exc)

    get_return_value.timely_spark_translating = True   # type: ignore[attr-defined]
    return get_return_value


def install() -> None:
    """Translate the errors of every later Spark call of this driver (idempotent).

    PySpark installs its own handler again whenever a ``SparkSession`` object is made
    (``DataFrame.sparkSession`` makes one, and so does every ``foreachBatch`` call), by
    wrapping py4j's function with ``capture_sql_exception``; that function is wrapped
    too, so that each handler PySpark installs later translates as well.  The Spark
    Connect client's errors are translated too (see :mod:`.connect`)."""
    import py4j.java_gateway
    from pyspark.errors.exceptions import captured

    capture = captured.capture_sql_exception
    if not getattr(capture, "timely_spark_translating", False):
        def capture_sql_exception(f: Callable[..., Any]) -> Callable[..., Any]:
            return _translating(capture(f))

        capture_sql_exception.timely_spark_translating = True   # type: ignore[attr-defined]
        captured.capture_sql_exception = capture_sql_exception
    current = py4j.java_gateway.get_return_value
    if not getattr(current, "timely_spark_translating", False):
        py4j.java_gateway.get_return_value = _translating(current)
    install_connect_translation(_translated)


def _translated(exc: BaseException) -> Optional[BaseException]:
    """The package's error for a Spark Connect client's ``exc`` (None: keep it).  The
    client raises it ``from None``: Spark's error is not its ``__cause__``."""
    cause = timely_cause(exc)
    return None if cause is None else chained(cause, exc)
