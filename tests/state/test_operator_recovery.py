"""Built-in stateful operators through the real snapshot protocol: a run with a
checkpoint that fails part way (after a snapshot was committed) and is run again from
the checkpoint -- on the same or another number of workers -- gives exactly the output
of a run without a failure: the failed run's output at times before the snapshot's
time, then the restored run's."""

from __future__ import annotations

import json
import os
import pickle

import pyarrow as pa
import pytest

import timely_spark as ts

from .helpers import manifests
from .opstate_harness import normalize
from .test_operator_state import CHANGES, EDGES, EVENTS, WORDS, _late_sums, _Reminder

FAIL_AT = 4

WINDOW_AGGS = [("v", "sum"), ([], "count_all")]


def _work(build, epochs, fail_at=None, sink=None, files=None):
    """The worker function; ``sink`` (threads only) gets each worker's output list as it
    starts, and ``files`` (a directory) each worker's output as it comes, so a failed
    run's output can be looked at."""
    def work(worker):
        out = []
        if sink is not None:
            sink.append(out)

        def record(t, r):
            out.append((t, r))
            if files is not None:
                with open(os.path.join(files, f"out-{worker.index}"), "ab") as f:
                    pickle.dump((t, r), f)

        def dataflow(scope):
            inp, stream = scope.new_input()
            waiting = stream.probe()           # delay holds later times: wait on the input
            build(scope, stream).inspect_time(record)
            return inp, waiting

        inp, probe = worker.dataflow(dataflow)
        for epoch in range(worker.restored_time or 0, len(epochs)):
            if fail_at is not None and epoch == fail_at - 2:       # a snapshot is committed first
                worker.step_while(lambda: not manifests(worker.config.checkpoint), timeout=60)
            if fail_at is not None and epoch == fail_at and worker.index == 0:
                raise RuntimeError(f"failed at epoch {epoch}")
            if worker.index == 0:
                inp.send_batch(list(epochs[epoch]))
            inp.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(inp.time), timeout=60)
        return worker.restored_time, out
    return work


def _records(rows):
    return [pa.record_batch({"k": [r[0] for r in rows], "seq": [r[1] for r in rows], "v": [r[2] for r in rows],
                             "gone": [r[3] for r in rows]})]


# a change feed: inserts, updates (two of a key in one epoch), deletes, a delete of an unknown key
UPSERTS = [_records([("a", 1, 1, False), ("b", 1, 2, False), ("a", 2, 3, False)]),
           _records([("c", 1, 4, False), ("b", 2, 5, False)]),
           _records([("a", 3, 3, True), ("z", 1, 0, True)]),
           _records([("a", 4, 7, False), ("c", 2, 8, False), ("c", 3, 9, False)]),
           _records([("b", 3, 5, True), ("d", 1, 1, False)]),
           _records([("a", 5, 1, False), ("d", 2, 2, False)])]


def _strings(batches):
    """Edge batches with string vertex ids."""
    out = []
    for b in batches:
        for n in ("src", "dst"):
            b = b.set_column(b.schema.get_field_index(n), n, b.column(n).cast(pa.string()))
        out.append(b)
    return out


def _running_sum(k, v, s):
    total = (s or 0) + v
    return total, [(k, total)]


PIPELINES = {
    "state_machine": (lambda s, x: x.state_machine(_running_sum), WORDS),
    "delay_aggregate": (lambda s, x: x.delay(lambda r, t: t + r[1] % 3).aggregate(
        lambda k, v, a: (a or 0) + v, lambda k, a: (k, a)), WORDS),
    "delay_total_count": (lambda s, x: x.delay_total(lambda r, t: t + r[1] % 3).count(), WORDS),
    "unary_notify": (_late_sums, WORDS),
    "vertex": (lambda s, x: x.vertex(_Reminder()), WORDS),
    "distinct": (lambda s, x: x.distinct(), CHANGES),
    "group_by_running": (lambda s, x: x.group_by("k").aggregate([("v", "sum"), ("v", "max")], running=True),
                         CHANGES),
    "join_running": (lambda s, x: x.join(x.map(lambda b: b.rename_columns(["k", "w", "diff"])), "k", running=True),
                     CHANGES),
    "pagerank": (lambda s, x: ts.graph.pagerank_stream(x, tolerance=1e-12).map(
        lambda b: b.set_column(1, "rank", pa.compute.round(b["rank"], 6))), EDGES),
    "shortest_paths": (lambda s, x: ts.graph.shortest_paths_stream(x, [1, 4]), EDGES),
    "components": (lambda s, x: ts.graph.components(x), EDGES),
    "components_strings": (lambda s, x: ts.graph.components(x), [_strings(e) for e in EDGES]),
    "upsert": (lambda s, x: x.upsert("k", sequence_by="seq", delete="gone"), UPSERTS),
    # windows open across the snapshot: tumbling ones closing at every other time, and
    # sessions of keys with rows at every time, open until the input ends
    "window_tumbling": (lambda s, x: x.group_by_window("t", keys="k", every=20, epoch=10).aggregate(WINDOW_AGGS),
                        EVENTS),
    "window_session": (lambda s, x: x.group_by_window("t", keys="k", gap=12, epoch=10).aggregate(WINDOW_AGGS),
                       EVENTS),
}


def _run(name, before, after, tmp_path):
    build, epochs = PIPELINES[name]
    reference = normalize([p for _, out in ts.execute(_work(build, epochs), threads=before, timeout=60)
                           for p in out])
    assert reference
    checkpoint = str(tmp_path)
    seen: list = []
    with pytest.raises(ts.WorkerError, match="failed at epoch"):
        ts.execute(_work(build, epochs, fail_at=FAIL_AT, sink=seen), threads=before, checkpoint=checkpoint,
                   snapshot_every=0.01, timeout=60)
    second = ts.execute(_work(build, epochs), threads=after, checkpoint=checkpoint, timeout=60)
    t = second[0][0]
    assert t is not None and 1 <= t <= FAIL_AT
    got = [p for out in seen for p in out if p[0] < t] + [p for _, out in second for p in out]
    assert normalize(got) == reference


@pytest.mark.parametrize("name", list(PIPELINES))
def test_a_failed_run_restored_gives_the_uninterrupted_output(tmp_path, name):
    _run(name, 2, 2, tmp_path)


@pytest.mark.parametrize("name", [n for n in PIPELINES if n not in ("unary_notify", "vertex")])
def test_restored_into_more_workers(tmp_path, name):
    _run(name, 2, 3, tmp_path)


def test_unkeyed_operator_state_is_refused_in_another_worker_count(tmp_path):
    build, epochs = PIPELINES["vertex"]
    checkpoint = str(tmp_path)
    with pytest.raises(ts.WorkerError, match="failed at epoch"):
        ts.execute(_work(build, epochs, fail_at=FAIL_AT), threads=2, checkpoint=checkpoint, snapshot_every=0.01,
                   timeout=60)
    with pytest.raises(ts.WorkerError, match="operator '_Reminder'.*unkeyed state.*same worker count"):
        ts.execute(_work(build, epochs), threads=3, checkpoint=checkpoint, timeout=60)


def test_route_values_outside_uint64_restore_into_the_same_worker_count_only(tmp_path):
    build = lambda s, x: x.state_machine(_running_sum, key=lambda k: -ord(k))     # noqa: E731
    PIPELINES["negative_routes"] = (build, WORDS)
    try:
        _run("negative_routes", 2, 2, tmp_path / "same")
        with pytest.raises(ts.WorkerError, match="operator 'StateMachine': its key function gave route values "
                                                 "outside"):
            _run("negative_routes", 2, 3, tmp_path / "more")
    finally:
        del PIPELINES["negative_routes"]


def _written(directory):
    pairs = []
    for name in os.listdir(directory):
        with open(os.path.join(directory, name), "rb") as f:
            while True:
                try:
                    pairs.append(pickle.load(f))
                except EOFError:
                    break
    return pairs


def test_on_processes(tmp_path):
    """State saved and restored in worker processes (files, not shared memory)."""
    def build(s, x):
        return x.delay(lambda r, t: t + r[1] % 3).state_machine(_running_sum)

    epochs = WORDS
    reference = normalize([p for _, out in ts.execute(_work(build, epochs), threads=2, timeout=60) for p in out])
    checkpoint, files = str(tmp_path / "checkpoint"), tmp_path / "out"
    files.mkdir()
    with pytest.raises(ts.WorkerError, match="failed at epoch"):
        ts.execute(_work(build, epochs, fail_at=FAIL_AT, files=str(files)), processes=2, checkpoint=checkpoint,
                   snapshot_every=0.01, timeout=60)
    second = ts.execute(_work(build, epochs), processes=2, checkpoint=checkpoint, timeout=60)
    t = second[0][0]
    assert t is not None and 1 <= t <= FAIL_AT
    got = [p for p in _written(files) if p[0] < t] + [p for _, out in second for p in out]
    assert normalize(got) == reference


def test_a_window_open_across_snapshots_does_not_hold_them_back(tmp_path):
    """A session open for the whole run (key "a" has rows at every time, within the gap)
    lets snapshots at later times complete: each epoch waits for a snapshot of its own
    time to be committed, and the output equals a run without a checkpoint."""
    build = PIPELINES["window_session"][0]
    epochs = [_events_at(e) for e in range(8)]

    def work(worker):
        out = []

        def dataflow(scope):
            inp, stream = scope.new_input()
            probe = build(scope, stream).inspect_time(lambda t, r: out.append((t, r))).probe()
            return inp, probe

        inp, probe = worker.dataflow(dataflow)
        for epoch, batches in enumerate(epochs):
            if worker.index == 0:
                inp.send_batch(list(batches))
            inp.advance_to(epoch + 1)
            if worker.config.checkpoint:          # a snapshot at this time (or later) is committed
                worker.step_while(lambda: _newest_time(worker.config.checkpoint) < epoch + 1, timeout=20)
            worker.step_while(lambda: probe.less_than(inp.time), timeout=20)
        return out

    reference = normalize([p for out in ts.execute(work, threads=2, timeout=60) for p in out])
    got = normalize([p for out in ts.execute(work, threads=2, checkpoint=str(tmp_path), snapshot_every=0.01,
                                             timeout=60) for p in out])
    assert got == reference
    assert [r for _, r in got if "'a'" in r and "('window_start', 5)" in r]     # open throughout
    assert len(manifests(str(tmp_path))) >= 1


def _events_at(epoch):
    """Rows at logical time ``epoch`` with event times in [10*epoch, 10*epoch + 10): key
    "a" at every epoch (one session), "b" only at epochs 0 and 5 (closed sessions)."""
    keys = ["a", "b"] if epoch in (0, 5) else ["a"]
    return [pa.record_batch({"t": [10 * epoch + 5] * len(keys), "k": keys, "v": [epoch] * len(keys)})]


def _newest_time(checkpoint):
    """The time of the newest committed snapshot in ``checkpoint`` (-1 without one)."""
    newest = -1
    for name in manifests(checkpoint):
        try:
            with open(os.path.join(checkpoint, name)) as f:
                newest = max(newest, json.load(f)["time"])
        except FileNotFoundError:             # an older one, removed meanwhile
            pass
    return newest


@pytest.mark.parametrize("name", ["window_session", "delay_aggregate"])
def test_a_finished_job_submitted_again_with_more_input_continues(tmp_path, name):
    """The final snapshot (taken when the inputs close) holds the dataflow at its time
    like any other: the session open when the first run's input ended is saved open,
    not closed by the end of that input, and records a delay holds for later times are
    saved held, not folded downstream -- so a run submitted again with more input
    goes on from there; the output equals one run over all the input."""
    build, epochs = PIPELINES[name]
    epochs = [_events_at(e) for e in range(8)] if name == "window_session" else epochs

    def work(stop):
        def run(worker):
            out = []

            def dataflow(scope):
                inp, stream = scope.new_input()
                probe = build(scope, stream).inspect_time(lambda t, r: out.append((t, r))).probe()
                return inp, probe

            inp, probe = worker.dataflow(dataflow)
            for epoch in range(worker.restored_time or 0, stop):
                if worker.index == 0:
                    inp.send_batch(list(epochs[epoch]))
                inp.advance_to(epoch + 1)
                worker.step_while(lambda: probe.less_than(inp.time), timeout=20)
            return worker.restored_time, out
        return run

    reference = normalize([p for _, out in ts.execute(work(len(epochs)), threads=2, timeout=60) for p in out])
    first = ts.execute(work(3), threads=2, checkpoint=str(tmp_path), timeout=60)
    second = ts.execute(work(len(epochs)), threads=3, checkpoint=str(tmp_path), timeout=60)
    t = second[0][0]
    assert t == 3
    got = [p for _, out in first for p in out if p[0] < t] + [p for _, out in second for p in out]
    assert normalize(got) == reference
