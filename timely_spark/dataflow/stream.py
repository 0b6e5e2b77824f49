"""Stream: the output of an operator, and the operators that can be applied to it.

Each operator is defined once, as a function in :mod:`.operators` (its docstring
states its contract and has a runnable example); the class body below is the one
place that makes it a ``Stream`` method.  Records move in batches ``(time, list)``;
the functions you pass are called once per record (``map``, ``filter``...) or once
per batch (``*_batch``).  Batches are shared between consumers: never mutate a list
you are given.
"""

from __future__ import annotations

from typing import Any, Callable

from ..progress import Source
from .operators import aggregation, batches, columns, core, enterleave, exchange_by, feedback, generic, group_by, split
from .operators import capture as capture_ops
from .operators import delay as delay_ops
from .operators import join as join_ops
from .operators import per_time as per_time_ops
from .operators import window as window_ops
from .operators.arranged import arrange as arrange_op
from .operators.consolidate import consolidate as consolidate_op
from .operators.distinct import distinct as distinct_op
from .operators.iterate import iterate as iterate_op
from .operators.iterate import negate as negate_op
from .operators.temporal import valid_during as valid_during_op
from .operators.upsert import upsert as upsert_op
from .probe import probe, probe_with
from .vertex import vertex

__all__ = ["Stream"]


class Stream:
    """A stream of timestamped records in a scope.

    ``scope`` is its scope, ``source`` the operator output that feeds it.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda scope: scope.to_stream(range(5))
    ...     .map(lambda x: x * 10).filter(lambda x: x != 20).inspect(print))
    0
    10
    30
    40
    """

    __slots__ = ("scope", "source", "_pushers", "is_broadcast")

    def __init__(self, scope: Any, source: Source, pushers: list, is_broadcast: bool = False) -> None:
        self.scope = scope
        self.source = source
        self._pushers = pushers
        self.is_broadcast = is_broadcast

    def connect(self, pusher: Callable[[Any, list], None]) -> None:
        """Deliver every batch of this stream to ``pusher(time, records)`` as well
        (operator builders connect their inputs this way).

        >>> import timely_spark as ts
        >>> _ = ts.example(lambda s: s.to_stream([1, 2]).connect(lambda t, batch: print(t, batch)))
        0 [1, 2]
        """
        self._pushers.append(pusher)

    def __repr__(self) -> str:
        return f"Stream(scope={self.scope.name!r}, source={self.source})"

    # record at a time, and batch at a time
    map = core.map
    flat_map = core.flat_map
    filter = core.filter
    map_batches = core.map_batches
    inspect = core.inspect
    inspect_time = core.inspect_time
    inspect_batch = core.inspect_batch
    # routing
    exchange = core.exchange
    broadcast = core.broadcast
    concat = core.concat
    partition = split.partition
    branch = split.branch
    branch_when = split.branch_when
    ok_err = split.ok_err
    # time
    delay = delay_ops.delay
    delay_total = delay_ops.delay_total
    reclock = delay_ops.reclock
    # columnar: streams of pyarrow.RecordBatch (filter above takes an expression too)
    exchange_by = exchange_by.exchange_by
    select = columns.select
    with_columns = columns.with_columns
    group_by = group_by.group_by
    join = join_ops.join
    per_time = per_time_ops.per_time
    rebatch = batches.rebatch
    to_records = batches.to_records
    from_records = batches.from_records
    # changelogs (a ``diff`` column: see operators/changelog.py)
    consolidate = consolidate_op
    distinct = distinct_op
    arrange = arrange_op
    upsert = upsert_op
    negate = negate_op
    iterate = iterate_op
    valid_during = valid_during_op
    group_by_window = window_ops.group_by_window      # event-time windows
    # aggregation
    count = aggregation.count
    accumulate = aggregation.accumulate
    aggregate = aggregation.aggregate
    state_machine = aggregation.state_machine
    # probes
    probe = probe
    probe_with = probe_with
    # loops and scopes
    connect_loop = feedback.connect_loop
    enter = enterleave.enter
    leave = enterleave.leave
    # generic operators, and Naiad's vertices
    unary = generic.unary
    unary_frontier = generic.unary_frontier
    unary_notify = generic.unary_notify
    binary = generic.binary
    binary_frontier = generic.binary_frontier
    binary_notify = generic.binary_notify
    sink = generic.sink
    vertex = vertex
    # capture (see timely_spark.capture)
    capture_into = capture_ops.capture_into
    capture = capture_ops.capture
