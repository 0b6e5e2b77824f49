"""A cut-and-restore harness for operator state, through the public hook.

Until the state layer writes and restores snapshots, a test stands in for its manager
(``worker.attach_snapshots``): a run is cut at time ``t`` once every operator has
finished the times before ``t`` (nothing sent at ``t`` yet: the state a pinned source
leaves), each operator's ``save(t)`` is called, and a second run (of the same or
another worker count) restores what they returned -- keyed state re-sharded by
``KEY_HASH % workers``, as a restore does -- and goes on from ``t``.
"""

from __future__ import annotations

import pickle

import pyarrow as pa

import timely_spark as ts
from timely_spark.dataflow.state_hook import KEY_HASH
from timely_spark.progress import sort_key


class Restorer:
    """A stand-in snapshot manager that only answers restores from ``values``
    (``{(worker, dataflow, address): value}``)."""

    def __init__(self, worker, values):
        self.worker, self.values = worker, values

    def poll(self):
        return False

    def busy(self):
        return False

    def built(self, graph):
        pass

    def restored(self, kept):
        return self.values.get((self.worker.index, kept.dataflow, kept.address))


def _key(rec):
    return (type(rec).__name__, repr(rec.to_pylist() if isinstance(rec, pa.RecordBatch) else rec))


def normalize(pairs):
    """(time, record) pairs as sorted (time, row) pairs (record batches split into rows)."""
    out = []
    for t, x in pairs:
        if isinstance(x, pa.RecordBatch):
            out.extend((t, repr(sorted(r.items()))) for r in x.to_pylist())
        else:
            out.append((t, repr(x)))
    return sorted(out, key=lambda p: (sort_key(p[0]), p[1]))


def _feed(worker, build, epochs, start, stop, cut=None, inputs=1, lagging=False, restore=None):
    seen = []
    if restore is not None:
        worker.attach_snapshots(Restorer(worker, restore))

    def dataflow(scope):
        handles, streams = zip(*[scope.new_input() for _ in range(inputs)])
        probes = [s.probe() for s in streams]
        out = build(scope, *streams)
        probe = out.inspect_time(lambda t, x: seen.append((t, x))).probe()
        return handles, (probes[0] if lagging else probe)

    handles, probe = worker.dataflow(dataflow)
    barrier = ts.sync.Barrier(worker)
    for h in handles:
        h.advance_to(start)
    for epoch in range(start, stop):
        if worker.index == 0:
            for h, batch in zip(handles, epochs[epoch] if inputs > 1 else [epochs[epoch]]):
                h.send_batch(list(batch))
        for h in handles:
            h.advance_to(epoch + 1)
        worker.step_while(lambda: probe.less_than(epoch + 1), timeout=30)
    if lagging:                      # operators that hold earlier times: let them settle
        for _ in range(3):
            worker.step()
            barrier.wait(timeout=30)
    if cut is not None:
        if worker.index == 0:         # input at the cut's time may arrive before a snapshot: not saved
            for h, batch in zip(handles, epochs[cut] if inputs > 1 else [epochs[cut]]):
                h.send_batch(list(batch))
        for _ in range(3):
            worker.step()
            barrier.wait(timeout=30)
        return list(seen), {(k.dataflow, k.address): (k.name, k.save(cut), k.keyed) for k in worker.kept_states()}
    for h in handles:
        h.close()
    worker.step_while(lambda: not probe.done(), timeout=30)
    return seen, None


def reshard(saved_per_worker, peers, route=lambda h, m: h % m):
    """The restore map {(worker, address): value} for ``peers`` workers."""
    restore = {}
    addresses = saved_per_worker[0].keys()
    for addr in addresses:
        name, _, keyed = saved_per_worker[0][addr]
        values = [s[addr][1] for s in saved_per_worker]
        if not keyed:
            assert len(values) == peers, f"unkeyed {name} into another worker count"
            for i, v in enumerate(values):
                restore[(i, *addr)] = pickle.loads(pickle.dumps(v))
            continue
        table = pa.concat_tables(values, promote_options="default")
        h = table.column(KEY_HASH).to_numpy()
        for i in range(peers):
            mask = route(h, peers) == i
            restore[(i, *addr)] = table.filter(pa.array(mask))
    return restore


def cut_and_restore(build, epochs, cut, before=2, after=2, inputs=1, route=lambda h, m: h % m, lagging=False):
    """The output of an uninterrupted run and of a run cut at ``cut`` (``before`` workers)
    and restored into ``after`` workers (normalized)."""
    n = len(epochs)
    whole = ts.execute(lambda w: _feed(w, build, epochs, 0, n, inputs=inputs, lagging=lagging)[0],
                       threads=before)
    first = ts.execute(lambda w: _feed(w, build, epochs, 0, cut, cut=cut, inputs=inputs, lagging=lagging),
                       threads=before)
    restore = reshard([s for _, s in first], after, route)
    second = ts.execute(lambda w: _feed(w, build, epochs, cut, n, inputs=inputs, lagging=lagging,
                                        restore=restore)[0], threads=after)
    got = [p for seen, _ in first for p in seen if sort_key(p[0]) < sort_key(cut)] + [p for s in second for p in s]
    return normalize([p for s in whole for p in s]), normalize(got)
