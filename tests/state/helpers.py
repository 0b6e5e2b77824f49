"""A user-defined stateful operator (built with OperatorBuilder and keep_state) and the
worker functions the state tests run."""

import os

import pyarrow as pa

import timely_spark as ts
from timely_spark.dataflow import OperatorBuilder

EPOCHS = 10


def keys_of(epoch):
    """The records one worker sends at ``epoch`` (deterministic, a few keys repeated)."""
    return [f"k{(epoch * 7 + i * 3) % 5}" for i in range(epoch % 4 + 2)]


def running_count(stream, keyed=True, name="RunningCount", schema=None):
    """(key, count so far) for each key seen at a time, emitted when the time completes.

    Its state: the counts, and the keys of complete times it has not emitted yet (with
    their time), so that a restored operator emits them."""
    b = OperatorBuilder(stream.scope, name)
    inp = b.new_input(stream, ts.Exchange(ts.stable_hash))
    out, counted = b.new_output()
    counts, stash = {}, {}

    def rows(t):
        rows = [(k, n, None) for k, n in counts.items()]
        rows += [(k, 1, s) for s, (_, keys) in stash.items() if s < t for k in keys]
        return pa.table({ts.KEY_HASH: pa.array([ts.stable_hash(r[0]) for r in rows], pa.uint64()),
                         "key": pa.array([r[0] for r in rows], pa.string()),
                         "count": pa.array([r[1] for r in rows], pa.int64()),
                         "time": pa.array([r[2] for r in rows], pa.int64())})

    def save(t):
        return rows(t) if keyed else rows(t).drop_columns([ts.KEY_HASH]).to_pylist()

    initial = b.initial_capability()
    restored = b.keep_state(save, keyed=keyed, schema=schema)
    if restored is not None:
        for r in (restored.to_pylist() if keyed else restored):
            if r["time"] is None:
                counts[r["key"]] = r["count"]
            else:
                stash.setdefault(r["time"], [initial.delayed(r["time"]), []])[1].extend([r["key"]] * r["count"])
    initial.drop()

    def logic():
        for cap, batch in inp:
            stash.setdefault(cap.time, [cap.retain(), []])[1].extend(batch)
        for s in sorted(t for t in stash if not inp.frontier.less_equal(t)):
            cap, keys = stash.pop(s)
            for k in keys:
                counts[k] = counts.get(k, 0) + 1
            out.session(cap).give_batch(sorted((k, counts[k]) for k in set(keys)))

    b.build(logic, notify=True)
    return counted


def manifests(checkpoint):
    return sorted(n for n in os.listdir(checkpoint) if n.startswith("manifest-") and n.endswith(".json"))


def counting(epochs=EPOCHS, stop_after=None, fail_at=None, keyed=True, name="RunningCount", schema=None,
             extra=False, static=()):
    """A worker function: the workers share ``keys_of(e)`` at each epoch ``e`` from
    ``worker.restored_time`` (0 on a fresh start) to ``epochs``, and return
    ``(restored_time, [(time, key, count), ...])`` of what their RunningCount emitted.

    ``stop_after``: return after sending that many epochs (a stop part way: the
    inputs close, and a final snapshot is taken).  ``fail_at``: every worker waits at
    epoch ``fail_at - 2`` (stepping) until a snapshot is committed (so one is, without
    relying on timing), and worker 0 raises at epoch ``fail_at``.  ``name``, ``schema``:
    the operator's; ``extra``: one more operator (a map) before it; ``static``: records
    of a ``to_stream`` counted too (at time 0)."""
    def work(worker):
        out = []

        def build(scope):
            inp, stream = scope.new_input()
            if extra:
                stream = stream.map(str)
            if static:
                stream = stream.concat(scope.to_stream(static[worker.index::worker.peers]))
            probe = running_count(stream, keyed=keyed, name=name, schema=schema).inspect_time(
                lambda t, r: out.append((t, r[0], r[1]))).probe()
            return inp, probe

        inp, probe = worker.dataflow(build)
        start = worker.restored_time or 0
        for epoch in range(start, epochs):
            if stop_after is not None and epoch >= stop_after:
                break
            if fail_at is not None and epoch == fail_at - 2:
                worker.step_while(lambda: not manifests(worker.config.checkpoint), timeout=60)
            if fail_at is not None and epoch == fail_at and worker.index == 0:
                raise RuntimeError(f"stopped at epoch {epoch}")
            inp.send_batch(keys_of(epoch)[worker.index::worker.peers])
            inp.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(inp.time), timeout=60)
        return worker.restored_time, out
    return work


def outputs(results, since=0):
    """Every worker's output at times >= since, sorted."""
    return sorted(x for _, out in results for x in out if x[0] >= since)
