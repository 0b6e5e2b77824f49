"""A user-defined stateful operator (OperatorBuilder + keep_state) stopped part way and
restored from its checkpoint: the same output as a run without a stop, on threads and
on processes, and into another worker count."""

import json
import os
import time

import pytest

import timely_spark as ts
from timely_spark.errors import RestoreError

from .helpers import EPOCHS, counting, manifests, outputs


@pytest.fixture(scope="module")
def reference():
    """The output of a run without stops or checkpoints."""
    return outputs(ts.execute(counting(), threads=1))


def test_the_reference_is_a_real_computation(reference):
    assert len(reference) > 2 * EPOCHS and max(c for _, _, c in reference) > 5


@pytest.mark.parametrize("mode", [{"threads": 2}, {"processes": 2}], ids=["threads", "processes"])
def test_a_run_stopped_part_way_resumes_from_its_final_snapshot(tmp_path, reference, mode):
    checkpoint = str(tmp_path)
    first = ts.execute(counting(stop_after=4), checkpoint=checkpoint, snapshot_every=0.01, **mode)
    assert [r for r, _ in first] == [None, None]
    second = ts.execute(counting(), checkpoint=checkpoint, snapshot_every=0.01, **mode)
    assert [r for r, _ in second] == [4, 4]              # the inputs closed at 4: the snapshot is at 4
    assert outputs(second, 4) == [x for x in reference if x[0] >= 4]
    assert outputs(first) == [x for x in reference if x[0] < 4]


@pytest.mark.parametrize("mode", [{"threads": 2}, {"processes": 2}], ids=["threads", "processes"])
def test_a_failed_run_resumes_from_its_last_snapshot(tmp_path, reference, mode):
    checkpoint = str(tmp_path)
    with pytest.raises(ts.WorkerError, match="stopped at epoch 6"):
        ts.execute(counting(fail_at=6), checkpoint=checkpoint, snapshot_every=0.01, **mode)
    assert manifests(checkpoint)
    second = ts.execute(counting(), checkpoint=checkpoint, snapshot_every=0.01, **mode)
    t = second[0][0]
    assert [r for r, _ in second] == [t, t] and 0 <= t <= 6           # a snapshot before epoch 6
    assert outputs(second, t) == [x for x in reference if x[0] >= t]
    assert set(outputs(second)) <= set(reference)        # what it emits for times before t too


def test_a_finished_job_submitted_again_does_nothing_again(tmp_path, reference):
    checkpoint = str(tmp_path)
    ts.execute(counting(), checkpoint=checkpoint, threads=2)
    again = ts.execute(counting(), checkpoint=checkpoint, threads=2)
    assert [r for r, _ in again] == [EPOCHS, EPOCHS] and outputs(again) == []


@pytest.mark.parametrize("before, after", [(2, 3), (3, 2)])
def test_keyed_state_restores_into_another_worker_count(tmp_path, reference, before, after):
    checkpoint = str(tmp_path)
    ts.execute(counting(stop_after=5), checkpoint=checkpoint, threads=before)
    second = ts.execute(counting(), checkpoint=checkpoint, threads=after)
    assert [r for r, _ in second] == [5] * after
    assert outputs(second, 5) == [x for x in reference if x[0] >= 5]
    assert all(out for _, out in second)                 # every worker holds some of the keys now


def test_unkeyed_state_restores_into_the_same_worker_count_only(tmp_path, reference):
    checkpoint = str(tmp_path)
    ts.execute(counting(stop_after=5, keyed=False), checkpoint=checkpoint, threads=2)
    with pytest.raises(ts.WorkerError) as e:
        ts.execute(counting(keyed=False), checkpoint=checkpoint, threads=3)
    assert isinstance(e.value.cause, RestoreError)
    assert "'RunningCount'" in str(e.value.cause) and "2 workers, this run 3" in str(e.value.cause)
    same = ts.execute(counting(keyed=False), checkpoint=checkpoint, threads=2)
    assert outputs(same, 5) == [x for x in reference if x[0] >= 5]


def test_only_the_last_snapshots_are_kept(tmp_path):
    checkpoint = str(tmp_path)
    for stop in (2, 4, 6, 8, 9):
        if stop == 9:      # left by a worker 0 that died between writing a manifest and renaming it
            open(os.path.join(checkpoint, "manifest-00000005.json.tmp-4242"), "w").close()
        ts.execute(counting(stop_after=stop), checkpoint=checkpoint, threads=2)
    assert manifests(checkpoint) == [f"manifest-{seq:08d}.json" for seq in (3, 4, 5)]
    assert sorted(n for n in os.listdir(checkpoint) if not n.startswith("manifest-")) == [
        "_OWNER"] + [f"snapshot-{seq:08d}" for seq in (3, 4, 5)]      # (and the lock file of its runs)
    assert not [n for n in os.listdir(checkpoint) if ".tmp-" in n]
    assert ts.state.read_snapshot(checkpoint).column("time").to_pylist() == [9, 9]
    assert ts.state.read_snapshot(checkpoint, seq=3).column("time").to_pylist() == [6, 6]


def test_records_sent_at_the_time_the_inputs_closed_are_in_the_final_snapshot(tmp_path):
    from .helpers import running_count

    def work(worker):
        out = []

        def build(scope):
            inp, stream = scope.new_input()
            running_count(stream).inspect_time(lambda t, r: out.append((t, *r)))
            return inp

        inp = worker.dataflow(build)
        inp.advance_to(worker.restored_time or 3)
        if worker.index == 0:
            inp.send_batch(["a"])                       # and the inputs close at this time
        return worker.restored_time, out

    checkpoint = str(tmp_path)
    assert outputs(ts.execute(work, threads=2, checkpoint=checkpoint)) == [(3, "a", 1)]
    again = ts.execute(work, threads=2, checkpoint=checkpoint)
    assert [r for r, _ in again] == [4, 4] and outputs(again) == [(4, "a", 2)]


def test_to_stream_records_are_in_the_snapshot_and_not_sent_again(tmp_path):
    static = ["k1", "k1", "z"]
    reference = outputs(ts.execute(counting(static=static), threads=1))
    checkpoint = str(tmp_path)
    ts.execute(counting(stop_after=3, static=static), checkpoint=checkpoint, threads=2)
    second = ts.execute(counting(static=static), checkpoint=checkpoint, threads=2)
    assert [r for r, _ in second] == [3, 3]
    assert outputs(second, 3) == [x for x in reference if x[0] >= 3]


def test_the_inputs_are_held_at_the_snapshot_time_until_every_worker_saved(tmp_path):
    """Worker 1 takes no part for a while (it does not step), so a snapshot pinned at
    worker 0's time c waits; meanwhile worker 0 sends and advances further.  The held
    inputs keep its records after c out of the snapshot, so the restored run, which
    sends them again, counts each once."""
    import threading
    import time

    from .helpers import running_count

    keys = ["k4", "k5", "k6", "k7"]                     # all routed to worker 0 (stable_hash % 2 == 0)
    go = threading.Event()

    def work(worker):
        out = []

        def build(scope):
            inp, stream = scope.new_input()
            running_count(stream).inspect_time(lambda t, r: out.append((t, *r)))
            return inp

        inp = worker.dataflow(build)
        start = worker.restored_time
        if worker.index == 1:
            inp.close()
            if start is None:
                go.wait(30)                             # not stepping: no part in the snapshot yet
            return start, out
        for epoch in range(start or 0, 8):
            inp.send_batch(keys[: epoch % 4 + 1])
            inp.advance_to(epoch + 1)
            if epoch == 2 and start is None and worker.config.checkpoint:   # a snapshot (due every 0.01 s) pins here
                began = time.monotonic()
                worker.step_while(lambda: time.monotonic() < began + 0.3)
        go.set()
        return start, out

    reference = outputs(ts.execute(work, threads=2))
    go.clear()
    checkpoint = str(tmp_path)
    first = ts.execute(work, threads=2, checkpoint=checkpoint, snapshot_every=0.01)
    times = ts.state.read_snapshot(checkpoint, seq=1).column("time").to_pylist()
    assert times[0] < 8 and outputs(first) == reference          # a snapshot before the end
    for name in manifests(checkpoint)[1:]:
        os.remove(os.path.join(checkpoint, name))        # restore the first one
    second = ts.execute(work, threads=2, checkpoint=checkpoint)
    t = second[0][0]
    assert t == times[0]
    assert outputs(second, t) == [x for x in reference if x[0] >= t]


def test_a_dataflow_built_after_a_worker_saved_is_not_in_that_snapshot(tmp_path):
    """A dataflow built between this worker's save and the commit has no state in the
    snapshot, so the manifest must not list it: a restore then builds it afresh (before,
    the manifest listed it and the restore failed: 'the snapshot holds none for it')."""
    import pyarrow as pa

    checkpoint = str(tmp_path)
    big = pa.table({"x": pa.array(range(300_000), pa.int64())})       # a write that takes a while

    def keeper(scope, name, saved):
        inp, stream = scope.new_input()
        b = ts.OperatorBuilder(scope, name)
        port = b.new_input(stream, ts.Pipeline)
        b.keep_state(lambda t: saved.append(t) or big)
        b.build(lambda: port.take())
        return inp

    def work(worker):
        saved = []
        first = worker.dataflow(lambda s: keeper(s, "First", saved))
        if worker.restored_time is None:
            first.send(1)
            first.advance_to(1)
            worker.step_while(lambda: not saved, timeout=30)
            worker.dataflow(lambda s: keeper(s, "Second", []))       # after the save, before the commit
            worker.step_while(lambda: not manifests(checkpoint), timeout=30)
            raise RuntimeError("stopped after the first snapshot")
        worker.dataflow(lambda s: keeper(s, "Second", []))
        return worker.restored_time

    with pytest.raises(ts.WorkerError, match="stopped after the first snapshot"):
        ts.execute(work, checkpoint=checkpoint, snapshot_every=0.01)
    assert ts.execute(work, checkpoint=checkpoint) == [1]


def test_a_dataflow_the_snapshot_does_not_hold_starts_from_the_beginning(tmp_path):
    """A dataflow built after the snapshot (so not in it) is built afresh by the restored
    run: its to_stream records are sent (they are in no snapshot) and a follow of a log
    reads it from the start -- not from the snapshot's time, which is another dataflow's."""
    from timely_spark.capture import ParquetEventWriter

    checkpoint, log = str(tmp_path / "ckpt"), tmp_path / "log"
    writer = ParquetEventWriter(log, flush_seconds=0.0)
    for e in range(3):
        writer.push(ts.capture.Messages(e, [f"log{e}"]))
        writer.push(ts.capture.Progress([(e, -1), (e + 1, 1)]))
    writer.push(ts.capture.Progress([(3, -1)]))
    writer.close()

    def work(worker):
        def first(scope):
            inp, stream = scope.new_input()
            return inp, stream.probe()

        inp, probe = worker.dataflow(first)
        start = worker.restored_time or 0
        for e in range(start, 4):
            inp.send(e)
            inp.advance_to(e + 1)
            worker.step_while(lambda: probe.less_than(inp.time), timeout=30)
        if worker.restored_time is None:
            worker.step_while(lambda: not manifests(checkpoint), timeout=30)   # a snapshot holding the first only
        seen = []

        def later(scope):
            scope.to_stream(["a", "b"]).inspect(seen.append)
            ts.capture.follow(log, scope).inspect(seen.append)

        worker.dataflow(later)
        if worker.restored_time is None:        # (no step: no later snapshot holds it)
            raise RuntimeError("stopped after building the later dataflow")
        worker.step_while(lambda: len(seen) < 5, timeout=10)
        return worker.restored_time, sorted(seen)

    with pytest.raises(ts.WorkerError, match="stopped after building"):
        ts.execute(work, checkpoint=checkpoint, snapshot_every=0.01)
    [(t, seen)] = ts.execute(work, checkpoint=checkpoint)
    assert t is not None and t > 0 and seen == ["a", "b", "log0", "log1", "log2"]



def test_no_snapshot_starts_after_the_final_one(tmp_path):
    """Once every source is closed and the final snapshot is committed, nothing can change
    and the other workers may finish: a periodic snapshot started after it would wait for
    them forever (runs hung with 'worker 0: running its dataflows to completion').  Here an
    operator keeps the dataflow running after the final snapshot, for longer than
    snapshot_every: no snapshot follows the final one."""
    import json
    import time

    checkpoint = str(tmp_path)
    done, wake = [], []

    def holder(scope):
        inp, stream = scope.new_input()
        b = ts.OperatorBuilder(scope, "Holder")
        port = b.new_input(stream, ts.Pipeline)
        held = [b.initial_capability().delayed(100)]      # a later time: the final snapshot is not held up

        def logic():
            port.take()
            if done and held:
                held.pop().drop()

        b.build(logic)
        wake.append(b.info().activate)
        return inp

    def final_committed():
        return any(json.load(open(os.path.join(checkpoint, n)))["final"] for n in manifests(checkpoint))

    def work(worker):
        inp = worker.dataflow(holder)
        inp.send(1)
        inp.close()
        worker.step_while(lambda: not final_committed(), timeout=30)
        began = time.monotonic()
        worker.step_while(lambda: time.monotonic() < began + 0.2)     # ten times snapshot_every
        done.append(True)
        wake[0]()
        return worker.index

    assert ts.execute(work, checkpoint=checkpoint, snapshot_every=0.02, timeout=30) == [0]
    last = manifests(checkpoint)[-1]
    assert json.load(open(os.path.join(checkpoint, last)))["final"], manifests(checkpoint)


def test_the_restored_snapshot_is_kept_while_the_run_may_still_read_it(tmp_path):
    """A restored run reads an operator's state when it builds the operator; newer
    snapshots committed before a later dataflow is built must not delete the snapshot it
    restores from (before: 'cannot read the state file', with snapshots_kept=1)."""
    checkpoint = str(tmp_path)

    def keeper(scope, name):
        inp, stream = scope.new_input()
        b = ts.OperatorBuilder(scope, name)
        port = b.new_input(stream, ts.Pipeline)
        restored = b.keep_state(lambda t: {"name": name})
        b.build(lambda: port.take())
        return inp, restored

    def work(worker):
        first, restored = worker.dataflow(lambda s: keeper(s, "First"))
        if worker.restored_time is None:
            second, _ = worker.dataflow(lambda s: keeper(s, "Second"))
            first.send(1)
            first.advance_to(1)
            second.advance_to(1)
            worker.step_while(lambda: not manifests(checkpoint), timeout=30)        # a snapshot of both
            raise RuntimeError("stopped")
        seen = manifests(checkpoint)
        worker.step_while(lambda: manifests(checkpoint) == seen, timeout=30)       # a newer one is committed
        _, later = worker.dataflow(lambda s: keeper(s, "Second"))                  # restored from the older
        return restored, later

    config = ts.Config(checkpoint=checkpoint, snapshot_every=0.01, snapshots_kept=1)
    with pytest.raises(ts.WorkerError, match="stopped"):
        ts.execute_config(work, config)
    assert ts.execute_config(work, config) == [({"name": "First"}, {"name": "Second"})]


def test_a_replayed_stream_is_held_by_snapshots_and_not_replayed_again(tmp_path):
    """replay_into is a source too: a snapshot holds it (nothing it sends at or after t is
    folded into the saved state) and a restored run replays only from t on.  Before, a
    finished job submitted again replayed everything into the restored counts."""
    from .helpers import running_count

    events = list(ts.example(lambda s: s.to_stream(["a", "b", "a"]).delay(lambda x, t: 0 if x == "b" else 3)
                             .capture()))
    checkpoint = str(tmp_path)

    def work(worker):
        out = []

        def build(scope):
            inp, stream = scope.new_input()
            running_count(stream.concat(ts.capture.replay_into([list(events)], scope))).inspect_time(
                lambda t, r: out.append((t, *r)))
            return inp

        worker.dataflow(build).advance_to(max(2, worker.restored_time or 0))
        return worker.restored_time, out

    assert ts.execute(work, checkpoint=checkpoint) == [(None, [(0, "b", 1), (3, "a", 2)])]
    assert ts.execute(work, checkpoint=checkpoint) == [(4, [])]        # held up to its last time, 3


def test_an_idle_run_writes_no_copies_of_one_snapshot(tmp_path):
    """While no time completes, a due snapshot would be the last one again: it is skipped
    (before: an idle run with snapshot_every=0.01 committed one identical snapshot each
    period); the final one, when the inputs close, is still taken."""
    checkpoint = str(tmp_path)

    from .helpers import running_count

    def build(scope):
        inp, stream = scope.new_input()
        running_count(stream)
        return inp

    def work(worker):
        inp = worker.dataflow(build)
        inp.send("a")
        inp.advance_to(3)
        worker.step_while(lambda: not manifests(checkpoint), timeout=30)
        deadline = time.monotonic() + 1.0                   # ~100 periods, idle at time 3
        worker.step_while(lambda: time.monotonic() < deadline, timeout=30)
        inp.close()
        return 0

    config = ts.Config(checkpoint=checkpoint, snapshot_every=0.01, snapshots_kept=1000, threads=2)
    ts.execute_config(work, config)
    bodies = [json.load(open(os.path.join(checkpoint, m))) for m in manifests(checkpoint)]
    assert [b["time"] for b in bodies if not b["final"]] == [3], [(b["time"], b["final"]) for b in bodies]
    assert bodies[-1]["final"]
