"""Run a Nexmark query on timely workers: events in, the answer and per-epoch latencies out.

The stream is cut into epochs of ``batch_events`` events, generated (in the timed
loop) and sent by worker ``epoch % peers``.  An epoch's logical time is the event time (ms since the Unix epoch)
of its first event, a bound below its events' times: so event-time windows close while
the stream runs, each at the logical time of its end, the same on any number of workers.
At most ``in_flight`` epochs are open at once; the latency of an epoch is the wall time
from its send to the probe passing it (every result that includes its events has then
been produced).

>>> from timely_spark.workloads.nexmark_run import run_query
>>> result = run_query("q2", 2_000, batch_events=500, workers=1)
>>> result.rows, len(result.latencies)
(1, 4)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Optional

import numpy as np
import pyarrow as pa

from ..dataflow.collection import collection
from ..errors import ParameterError
from ..execute import execute
from .nexmark import BASE_TIME_MS, batches, events
from .nexmark_queries import QUERIES

__all__ = ["QueryRun", "generator_rate", "run_query"]

MILLISECOND = timedelta(milliseconds=1)     # logical times are event times in ms


@dataclass
class QueryRun:
    """What :func:`run_query` measured: the answer (a collection; None unless collected),
    the rows the query emitted, the seconds from the first send to the last epoch's
    completion, and each epoch's latency in seconds."""

    answer: Optional[pa.Table]
    rows: int
    seconds: float
    latencies: np.ndarray


def run_query(query: str, count: int, batch_events: int = 10_000, workers: int = 1, seed: int = 0,
              rate: float = 10_000.0, in_flight: int = 2, timeout: float = 600.0, collect: bool = True
              ) -> QueryRun:
    """Run Nexmark query ``query`` (``"q0"`` .. ``"q8"``) on the first ``count`` events
    with ``workers`` local worker threads; the answer is the collection of its output
    (``collect=False``: only its rows are counted)."""
    if query not in QUERIES:
        raise ParameterError(f"nexmark: unknown query {query!r}; one of {', '.join(QUERIES)}", "query")
    epochs = -(-count // batch_events)
    times = [BASE_TIME_MS + int(e * batch_events * 1000.0 / rate) for e in range(epochs)]
    if len(set(times)) < epochs:
        raise ParameterError(f"nexmark: epochs of batch_events={batch_events} at rate={rate} events/s share a "
                         "millisecond; make them longer", "batch_events")
    times.append(times[-1] + 1)

    def work(worker: Any) -> tuple[list, float, list]:
        out: list = []

        def build(scope: Any) -> Any:
            inputs = [scope.new_input() for _ in range(3)]
            (_, people), (_, auctions), (_, bids) = inputs
            result = QUERIES[query](people, auctions, bids, MILLISECOND)
            result.inspect_time(lambda t, batch: out.append(batch if collect else batch.num_rows))
            return [handle for handle, _ in inputs], result.probe()

        handles, probe = worker.dataflow(build)
        sent, done, finished = [0.0] * epochs, [0.0] * epochs, 0
        start = time.perf_counter()

        def note_done() -> None:
            nonlocal finished
            while finished < epochs and not probe.less_than(times[finished + 1]):
                done[finished] = time.perf_counter()
                finished += 1

        for t in range(epochs):
            for handle in handles:
                handle.advance_to(times[t])
            if t % worker.peers == worker.index:            # generated here: its cost is counted
                made = events(t * batch_events, min(batch_events, count - t * batch_events), seed, rate)
                for handle, batch in zip(handles, made):
                    handle.send_batch(batch)
            for handle in handles:
                handle.advance_to(times[t + 1])
            sent[t] = time.perf_counter()
            while finished < t + 1 - in_flight:
                worker.step()
                note_done()
        for handle in handles:
            handle.close()
        while finished < epochs:
            worker.step()
            note_done()
        while worker.step():
            pass
        return out, time.perf_counter() - start, [d - s for s, d in zip(sent, done)]

    results = execute(work, threads=workers, timeout=timeout)
    seconds = max(s for _, s, _ in results)
    latencies = np.max(np.array([lat for _, _, lat in results]), axis=0)
    if not collect:
        return QueryRun(None, sum(n for out, _, _ in results for n in out), seconds, latencies)
    outputs = [batch for out, _, _ in results for batch in out if batch.num_rows]
    answer = collection(pa.Table.from_batches(outputs)) if outputs else pa.table({})
    return QueryRun(answer, sum(b.num_rows for b in outputs), seconds, latencies)


def generator_rate(count: int, batch_events: int = 100_000) -> float:
    """Events per second the generator makes alone (one thread)."""
    start = time.perf_counter()
    for _ in batches(count, batch_events):
        pass
    return count / (time.perf_counter() - start)
