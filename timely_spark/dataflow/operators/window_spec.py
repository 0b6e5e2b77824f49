"""The parameters of ``group_by_window`` and the event-time clock they describe.

* :func:`window_spec` checks the parameters once, when the dataflow is built (a
  :class:`~timely_spark.errors.ParameterError` naming the parameter);
* :class:`Clock` turns them into integers in the time column's unit once the first
  batch shows the column's type, reads the column as int64 (a
  :class:`~timely_spark.errors.WindowError` for nulls or a non-temporal type), and
  turns logical times into event-time bounds (see :meth:`Clock.epoch_start`).

Windows are aligned on 0 of the column: the Unix epoch for timestamps (as Spark's
``window`` with no ``startTime``), 0 for integers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, Optional, Union

import numpy as np
import pyarrow as pa

from ...errors import ParameterError, WindowError

__all__ = ["Duration", "WindowSpec", "window_spec", "Clock", "epoch_start", "LATE_CHOICES", "MAX_WINDOWS_PER_ROW",
           "INT64_MIN", "INT64_MAX"]

#: A length of event time: a ``datetime.timedelta`` (timestamp columns), or an int in
#: the time column's unit.
Duration = Union[int, timedelta]

#: What ``late=`` takes: drop (and count) late rows, or send them to ``.late``.
LATE_CHOICES = ("drop", "output")

#: The most sliding windows one row may belong to (``ceil(period / every)``): each row is
#: aggregated once per window holding it, so a longer ``period`` for its ``every`` is a
#: ParameterError when the dataflow is built (Spark would copy each row that many times).
MAX_WINDOWS_PER_ROW = 10_000

#: The range of event times and durations, in the time column's unit (int64).
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_UNIT_NANOS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}


@dataclass(frozen=True)
class WindowSpec:
    """Checked parameters of ``group_by_window`` (durations not yet in column units)."""

    column: str
    kind: str                       # "tumbling", "sliding" or "session"
    every: Optional[Duration]
    period: Optional[Duration]
    gap: Optional[Duration]
    lateness: Duration
    epoch: Union[None, Duration, Callable[[Any], Any]]
    late: str


def _is_duration(d: Any) -> bool:
    return isinstance(d, timedelta) or (isinstance(d, (int, np.integer)) and not isinstance(d, bool))


def _positive(d: Any, parameter: str, operator: str, zero_ok: bool = False) -> Duration:
    if not _is_duration(d):
        raise ParameterError(f"operator {operator!r}: {parameter} must be a datetime.timedelta or an int "
                             f"(in the time column's unit), got {type(d).__name__}", parameter)
    if d < (timedelta(0) if isinstance(d, timedelta) else 0) or (not zero_ok and not d):
        need = "zero or positive" if zero_ok else "positive"
        raise ParameterError(f"operator {operator!r}: {parameter} must be {need}, got {d!r}", parameter)
    if not isinstance(d, timedelta) and d > INT64_MAX:
        raise ParameterError(f"operator {operator!r}: {parameter}={d!r} does not fit an int64 time column", parameter)
    return d if isinstance(d, timedelta) else int(d)


def window_spec(time_column: Any, every: Any, period: Any, gap: Any, allowed_lateness: Any, epoch: Any,
                late: Any, operator: str) -> WindowSpec:
    """The parameters checked: exactly one of ``every`` (tumbling; with ``period``,
    sliding) and ``gap`` (session); positive lengths, ``period >= every``, a lateness
    ``>= 0`` (``> 0`` only with an ``epoch``), ``epoch`` None, a positive duration or a function, ``late`` one of
    :data:`LATE_CHOICES`; a sliding window's rows each in at most :data:`MAX_WINDOWS_PER_ROW` windows.

    >>> window_spec("ts", 60, None, None, 0, None, "drop", "W").kind
    'tumbling'
    >>> window_spec("ts", 0, None, None, 0, None, "drop", "W")
    Traceback (most recent call last):
    timely_spark.errors.ParameterError: operator 'W': every must be positive, got 0
    """
    if not isinstance(time_column, str):
        raise ParameterError(f"operator {operator!r}: time_column must be a column name, got {time_column!r}",
                             "time_column")
    if (every is None) == (gap is None):
        raise ParameterError(f"operator {operator!r}: give either every= (tumbling, or sliding with period=) "
                             f"or gap= (session windows), not {'both' if every is not None else 'neither'}",
                             "every" if every is None else "gap")
    if gap is not None and period is not None:
        raise ParameterError(f"operator {operator!r}: period= is for sliding windows (with every=), not with gap=",
                             "period")
    if every is not None:
        every = _positive(every, "every", operator)
    if period is not None:
        period = _positive(period, "period", operator)
        if type(period) is not type(every):
            raise ParameterError(f"operator {operator!r}: every and period must both be timedeltas or both "
                                 f"ints, got {every!r} and {period!r}", "period")
        if period < every:
            raise ParameterError(f"operator {operator!r}: period ({period!r}) is shorter than every ({every!r}): "
                                 f"rows between windows would belong to none", "period")
        per_row = period // every + (1 if period % every else 0)
        if per_row > MAX_WINDOWS_PER_ROW:
            raise ParameterError(f"operator {operator!r}: period={period!r} with every={every!r} puts each row in "
                                 f"{per_row} windows, over the limit of {MAX_WINDOWS_PER_ROW}: use a longer every",
                                 "period")
    if gap is not None:
        gap = _positive(gap, "gap", operator)
    lateness = _positive(allowed_lateness, "allowed_lateness", operator, zero_ok=True)
    if epoch is not None and not callable(epoch):
        epoch = _positive(epoch, "epoch", operator)
    if epoch is None and lateness:
        raise ParameterError(f"operator {operator!r}: allowed_lateness={lateness!r} needs epoch=: without it the "
                             f"logical times say nothing about event time and windows close only when the input "
                             f"ends, so a lateness would have no effect", "allowed_lateness")
    if late not in LATE_CHOICES:
        raise ParameterError(f"operator {operator!r}: late must be one of {', '.join(map(repr, LATE_CHOICES))}, "
                             f"got {late!r}", "late")
    kind = "session" if gap is not None else ("sliding" if period is not None and period != every else "tumbling")
    return WindowSpec(time_column, kind, every, period if period is not None else every, gap, lateness, epoch, late)


class Clock:
    """Event time in the time column's unit, for a column of ``column_type``.

    >>> import pyarrow as pa
    >>> from datetime import timedelta
    >>> c = Clock(pa.timestamp("ms"), "ts", "W")
    >>> c.units(timedelta(minutes=1), "every"), c.ints(pa.array([1500], pa.timestamp("ms")), 0).tolist()
    (60000, [1500])
    """

    def __init__(self, column_type: pa.DataType, column: str, operator: str) -> None:
        if not (pa.types.is_timestamp(column_type) or pa.types.is_integer(column_type)):
            raise WindowError(f"operator {operator!r}: time column {column!r} is {column_type}; event time must be "
                              f"a timestamp or an integer column")
        self.type, self.column, self.operator = column_type, column, operator
        self.is_timestamp = pa.types.is_timestamp(column_type)

    def units(self, d: Duration, parameter: str) -> int:
        """Duration ``d`` as an int of the column's unit; a ParameterError if it is a
        timedelta for an integer column, not a whole number of the unit, or longer than
        an int64 of the unit."""
        if not isinstance(d, timedelta):
            return int(d)
        if not self.is_timestamp:
            raise ParameterError(f"operator {self.operator!r}: {parameter}={d!r} is a timedelta but time column "
                                 f"{self.column!r} is {self.type}: give an int in its unit", parameter)
        micros = (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds
        nanos = _UNIT_NANOS[self.type.unit]
        whole, rest = divmod(micros * 1000, nanos)
        if rest:
            raise ParameterError(f"operator {self.operator!r}: {parameter}={d!r} is not a whole number of "
                                 f"{self.type.unit} (the unit of time column {self.column!r})", parameter)
        if whole > INT64_MAX:
            raise ParameterError(f"operator {self.operator!r}: {parameter}={d!r} is longer than an int64 of "
                                 f"{self.type.unit} (the unit of time column {self.column!r}) can hold", parameter)
        return whole

    def value(self, v: Any, what: str) -> int:
        """An event time (a datetime for timestamp columns, or an int) as an int."""
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            return int(v)
        try:
            return int(pa.scalar(v, type=self.type).cast(pa.int64()).as_py())
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
            raise WindowError(f"operator {self.operator!r}: {what} is {v!r}, not an event time of time column "
                              f"{self.column!r} ({self.type})") from exc

    def ints(self, array: Any, time: Any) -> np.ndarray:
        """The time column as int64 numbers of its unit; a WindowError for nulls or
        another type than the first batch's."""
        if not array.type.equals(self.type):
            raise WindowError(f"operator {self.operator!r}: time column {self.column!r} is {array.type} at time "
                              f"{time!r}, but {self.type} before")
        if array.null_count:
            raise WindowError(f"operator {self.operator!r}: time column {self.column!r} has {array.null_count} "
                              f"null value(s) at time {time!r}; a row without an event time has no window")
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        return np.asarray(array.cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)

    def array(self, ints: np.ndarray) -> pa.Array:
        """int64 numbers of the column's unit as an array of the column's type."""
        return pa.array(ints, pa.int64()).cast(self.type)


def epoch_start(clock: Clock, epoch: Any, time: Any) -> float:
    """The least event time a row at logical ``time`` may carry (before lateness),
    as declared by ``epoch``: ``time * epoch`` for a duration (logical times are ints),
    ``epoch(time)`` for a function; ``-inf`` when ``epoch`` is None (logical time says
    nothing about event time).

    >>> import pyarrow as pa
    >>> epoch_start(Clock(pa.int64(), "t", "W"), 10, 3), epoch_start(Clock(pa.int64(), "t", "W"), None, 3)
    (30, -inf)
    """
    if epoch is None:
        return -math.inf
    if callable(epoch):
        return clock.value(epoch(time), f"epoch({time!r})")
    if not isinstance(time, int):
        raise WindowError(f"operator {clock.operator!r}: logical time {time!r} is not an int, so epoch={epoch!r} "
                          f"cannot say when it starts; pass epoch=a function of the logical time")
    return time * clock.units(epoch, "epoch")
