"""Where ``ts.graph``'s operators say how much state they hold: each reports the rows it
keeps per time to the :data:`GRAPH_LOG` stream of the worker's logging registry, if a
handler is registered (events ``state`` with ``name``, the operator; ``count``, rows;
``frontier``, the time as a 1-tuple).  Tests use it to check that work is spread over
the workers; ``jobs/benchmarks/bench_graph.py`` prints each worker's peak.  The split
search of the stream components reports the visits each round brought and the vertices they
reached first (events ``visits`` and ``reached``, their ``count`` those), which
``jobs/benchmarks/bench_rounds.py`` sums per epoch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..dataflow import Scope

__all__ = ["GRAPH_LOG", "log_state", "log_visits"]

#: The logging-registry stream graph operators report their state sizes to.
GRAPH_LOG = "graph"


def log_state(scope: "Scope", operator: str, time: Any, rows: int) -> None:
    """Report that ``operator`` holds ``rows`` rows at ``time`` on this worker, to the
    :data:`GRAPH_LOG` stream of its logging registry (nothing if no handler is registered).

    >>> import timely_spark as ts
    >>> def work(worker):
    ...     seen = []
    ...     worker.log_register().insert(GRAPH_LOG, seen.extend)
    ...     worker.dataflow(lambda s: log_state(s, "Op", 3, 10))
    ...     worker.log_register().flush()
    ...     return [(e["name"], e["count"], e["frontier"]) for e in seen]
    >>> ts.execute(work)
    [[('Op', 10, (3,))]]
    """
    logger = scope.worker.log_register().get(GRAPH_LOG)
    if logger is not None:
        logger.log("state", name=operator, count=int(rows), frontier=(time,))


def log_visits(scope: "Scope", operator: str, time: Any, visits: int, reached: int) -> None:
    """Report that ``operator``'s search took ``visits`` visits at ``time`` on this worker,
    ``reached`` of them the first to a vertex (events ``visits`` and ``reached`` of
    :data:`GRAPH_LOG`, their ``count`` these, the other fields as :func:`log_state`'s)."""
    logger = scope.worker.log_register().get(GRAPH_LOG)
    if logger is not None:
        logger.log("visits", name=operator, count=int(visits), frontier=(time,))
        logger.log("reached", name=operator, count=int(reached), frontier=(time,))
