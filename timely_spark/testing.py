"""Helpers for testing dataflows: run one on given inputs and look at what came out,
per time, and at the frontiers it went through.

* :func:`collect` -- run ``build(scope) -> stream`` on every worker; the
  ``(time, record)`` pairs that reached the stream, over all workers, sorted;
* :func:`collect_per_worker` -- the records each worker saw;
* :func:`feed_epochs` -- inside a worker function: feed batches epoch by epoch into
  ``build(scope, stream) -> stream``, stepping until each epoch is complete;
* :func:`run_epochs` -- the same on threads or processes: a :class:`EpochRun` with the
  output per time (merged over workers) and the output frontier after each epoch;
* :func:`assert_frontier` -- a frontier (of a probe, or an antichain) is exactly the
  given times.

Every wait is bounded by ``timeout`` seconds, so a dataflow that never completes fails
the test with ``TimeoutError`` (or :class:`~timely_spark.errors.RunTimeout`) instead of
hanging it.  Work functions travel to processes with cloudpickle, so lambdas work.

>>> import timely_spark as ts
>>> from timely_spark.testing import run_epochs
>>> run = run_epochs(lambda scope, s: s.map(lambda x: x * 10), [[1, 2], [], [3]], threads=2)
>>> run.by_time
{0: [10, 20], 2: [30]}
>>> run.frontiers
[[1], [2], [3], []]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from .dataflow import Scope, Stream, Worker
from .execute import execute
from .progress import less_equal, sort_key

__all__ = ["collect", "collect_per_worker", "feed_epochs", "run_epochs", "EpochRun", "assert_frontier",
           "DEFAULT_TIMEOUT"]

#: Seconds a helper waits for a run (or for one epoch) before it fails.
DEFAULT_TIMEOUT = 30.0


def _order(record: Any) -> Any:
    return (type(record).__name__, repr(record))


def collect(build: Callable[[Scope], Stream], threads: int = 1, processes: int = 1, time: Any = 0,
            timeout: float = DEFAULT_TIMEOUT) -> list[tuple[Any, Any]]:
    """Run ``build(scope) -> stream`` on every worker (top-scope times like ``time``);
    return the sorted ``(time, record)`` pairs that reached the stream, over all workers.

    >>> collect(lambda s: s.to_stream([3, 1]).exchange(lambda x: x), threads=2)
    [(0, 1), (0, 1), (0, 3), (0, 3)]
    """
    def work(worker: Worker) -> list:
        seen: list = []
        worker.dataflow(lambda scope: build(scope).inspect_time(lambda t, x: seen.append((t, x))), time=time)
        while worker.step():
            pass
        return seen

    out = [pair for part in execute(work, threads=threads, processes=processes, timeout=timeout) for pair in part]
    return sorted(out, key=lambda p: (sort_key(p[0]), _order(p[1])))


def collect_per_worker(build: Callable[[Scope], Stream], threads: int = 1, processes: int = 1,
                       timeout: float = DEFAULT_TIMEOUT) -> list[list]:
    """The records each worker saw on ``build(scope)``'s stream (sorted), in worker order.

    >>> collect_per_worker(lambda s: s.to_stream([0, 1, 2, 3] if s.index == 0 else []).exchange(lambda x: x),
    ...                    threads=2)
    [[0, 2], [1, 3]]
    """
    def work(worker: Worker) -> list:
        seen: list = []
        worker.dataflow(lambda scope: build(scope).inspect(seen.append))
        while worker.step():
            pass
        return sorted(seen, key=_order)

    return execute(work, threads=threads, processes=processes, timeout=timeout)


def feed_epochs(worker: Worker, build: Callable[[Scope, Stream], Stream], batches: Sequence[Sequence[Any]],
                timeout: float = DEFAULT_TIMEOUT, frontiers: Optional[list] = None) -> list[tuple[int, Any]]:
    """Inside a worker function: feed ``batches[epoch]`` (on worker 0) into
    ``build(scope, stream) -> stream`` one epoch at a time, stepping until each epoch is
    complete (at most ``timeout`` seconds each); returns the ``(time, record)`` pairs this
    worker saw, in arrival order.  ``frontiers``, if given, receives the output's
    frontier (a sorted list) after each epoch and at the end.

    >>> import timely_spark as ts
    >>> ts.execute(lambda w: feed_epochs(w, lambda s, x: x.map(str), [[1], [2]]))
    [[(0, '1'), (1, '2')]]
    """
    seen: list = []

    def dataflow(scope: Scope) -> Any:
        inp, stream = scope.new_input()
        probe = build(scope, stream).inspect_time(lambda t, x: seen.append((t, x))).probe()
        return inp, probe

    inp, probe = worker.dataflow(dataflow)
    for epoch, batch in enumerate(batches):
        if worker.index == 0:
            inp.send_batch(list(batch))
        inp.advance_to(epoch + 1)
        worker.step_while(lambda: probe.less_than(inp.time), timeout=timeout)
        if frontiers is not None:
            frontiers.append(sorted(probe.frontier, key=sort_key))
    inp.close()
    worker.step_while(lambda: not probe.done(), timeout=timeout)
    if frontiers is not None:
        frontiers.append([])
    return seen


@dataclass
class EpochRun:
    """What :func:`run_epochs` saw: ``by_time`` maps each output time to its records
    (over all workers, sorted); ``frontiers`` is worker 0's output frontier after each
    epoch and at the end; ``per_worker`` the ``(time, record)`` pairs of each worker."""

    by_time: dict = field(default_factory=dict)
    frontiers: list = field(default_factory=list)
    per_worker: list = field(default_factory=list)

    def collection(self, t: Any) -> Any:
        """The collection the output changelog denotes at time ``t`` (its record batches at
        times ``<= t`` folded by :func:`~timely_spark.collection`; an empty table if none).

        >>> import pyarrow as pa
        >>> run = run_epochs(lambda s, x: x.distinct(), [[pa.record_batch({"x": [1, 1]})],
        ...                                            [pa.record_batch({"x": [1], "diff": [-2]})]])
        >>> run.collection(0).to_pylist(), run.collection(1).num_rows
        ([{'x': 1}], 0)
        """
        import pyarrow as pa

        from .dataflow.collection import collection
        batches = [b for when, records in self.by_time.items() if less_equal(when, t) for b in records]
        return collection(pa.Table.from_batches(batches)) if batches else pa.table({})


def run_epochs(build: Callable[[Scope, Stream], Stream], batches: Sequence[Sequence[Any]], threads: int = 1,
               processes: int = 1, timeout: float = DEFAULT_TIMEOUT) -> EpochRun:
    """Run :func:`feed_epochs` on ``threads`` workers in each of ``processes`` processes.

    >>> run = run_epochs(lambda s, x: x.count(), [["a", "b"], ["c"]])
    >>> run.by_time, run.frontiers
    ({0: [2], 1: [1]}, [[1], [2], []])
    """
    def work(worker: Worker) -> tuple[list, list]:
        frontiers: list = []
        seen = feed_epochs(worker, build, batches, timeout, frontiers)
        return seen, frontiers

    parts = execute(work, threads=threads, processes=processes, timeout=None)
    run = EpochRun(frontiers=parts[0][1], per_worker=[seen for seen, _ in parts])
    for seen, _ in parts:
        for t, x in seen:
            run.by_time.setdefault(t, []).append(x)
    run.by_time = {t: sorted(run.by_time[t], key=_order) for t in sorted(run.by_time, key=sort_key)}
    return run


def assert_frontier(frontier: Any, expected: Sequence[Any]) -> None:
    """Assert that ``frontier`` (a ProbeHandle, an Antichain or a list of times) holds
    exactly the times in ``expected``, with a message showing both.

    >>> from timely_spark.progress import Antichain
    >>> assert_frontier(Antichain([3]), [3])
    >>> assert_frontier(Antichain([3]), [])
    Traceback (most recent call last):
    ...
    AssertionError: frontier is [3], expected []
    """
    times = getattr(frontier, "frontier", frontier)
    got = sorted(times, key=sort_key)
    want = sorted(expected, key=sort_key)
    if got != want:
        raise AssertionError(f"frontier is {got}, expected {want}")
