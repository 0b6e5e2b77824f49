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


def collatz_steps(n):
    """The reference: how many Collatz steps take ``n`` to 1."""
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def collatz_dataflow(scope, numbers):
    """Step counts computed by a loop: each number circulates (exchanged by its current
    value) until it reaches 1; the round it leaves at is its step count.  Returns a
    stream of ``(n, steps)`` in ``scope`` (numbers are fed from worker 0)."""
    start = scope.to_stream(numbers if scope.index == 0 else [])

    def rounds(cap, info):
        cap.drop()

        def logic(input, output):
            for t, batch in input:
                output.session(t).give_batch([(s[0], t.time.inner) for s in batch])

        return logic

    def loop(inner):
        handle, cycle = inner.feedback(1)
        state = start.map(lambda n: (n, n)).enter(inner).concat(cycle)
        done, going = state.branch(lambda s: s[1] != 1)
        going.exchange(lambda s: s[1]).map(
            lambda s: (s[0], s[1] // 2 if s[1] % 2 == 0 else 3 * s[1] + 1)).connect_loop(handle)
        return done.unary(None, "Rounds", rounds).leave()

    return scope.iterative(loop)
