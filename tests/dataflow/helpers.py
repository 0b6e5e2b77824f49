"""Helpers for engine tests: run a dataflow and collect what reaches its end."""

from __future__ import annotations

import timely_spark as ts
from timely_spark.progress import sort_key


def collect(build, threads=1, time=0, processes=1):
    """Run ``build(scope) -> stream`` on every worker; return the sorted list of
    ``(time, record)`` that reached the stream, over all workers."""

    def work(worker):
        seen = []
        worker.dataflow(lambda scope: build(scope).inspect_time(lambda t, x: seen.append((t, x))), time=time)
        return seen

    out = [pair for part in ts.execute(work, threads=threads, processes=processes) for pair in part]
    return sorted(out, key=lambda p: (sort_key(p[0]), repr(p[1])))


def per_worker(build, threads, processes=1):
    """Like ``collect`` but the records each worker saw (without times), sorted."""

    def work(worker):
        seen = []
        worker.dataflow(lambda scope: build(scope).inspect(seen.append))
        return seen   # filled as the dataflow runs, after this function returns

    return [sorted(seen, key=repr) for seen in ts.execute(work, threads=threads, processes=processes)]


def epochs(worker, build, batches):
    """Feed ``batches[epoch]`` (on worker 0) into ``build(scope, stream) -> stream``,
    one epoch at a time, stepping until each epoch is complete; return
    ``[(epoch, record), ...]`` seen by this worker in arrival order."""
    seen = []

    def dataflow(scope):
        inp, stream = scope.new_input()
        probe = build(scope, stream).inspect_time(lambda t, x: seen.append((t, x))).probe()
        return inp, probe

    inp, probe = worker.dataflow(dataflow)
    for epoch, batch in enumerate(batches):
        if worker.index == 0:
            inp.send_batch(batch)
        inp.advance_to(epoch + 1)
        worker.step_while(lambda: probe.less_than(inp.time), timeout=30)
    inp.close()
    worker.step_while(lambda: not probe.done(), timeout=30)
    return seen
