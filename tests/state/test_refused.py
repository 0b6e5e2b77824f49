"""Checkpoints that cannot be used as they are: a damaged newest snapshot falls back to
the one before with a warning, nothing usable is an error, and a checkpoint of another
dataflow (or a dataflow that cannot be checkpointed) is refused, naming what differs."""

import glob
import json
import os
import re

import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.errors import CheckpointError, RestoreError

from .helpers import counting, manifests, outputs


@pytest.fixture
def two_snapshots(tmp_path):
    """A checkpoint with two committed snapshots: at time 3, then at time 6."""
    checkpoint = str(tmp_path)
    ts.execute(counting(stop_after=3), checkpoint=checkpoint, threads=2)
    ts.execute(counting(stop_after=6), checkpoint=checkpoint, threads=2)
    assert manifests(checkpoint) == ["manifest-00000001.json", "manifest-00000002.json"]
    return checkpoint


@pytest.fixture(scope="module")
def reference():
    return outputs(ts.execute(counting(), threads=1))


def restore_error(checkpoint, work=None, threads=2):
    with pytest.raises(ts.WorkerError) as e:
        ts.execute(work or counting(), checkpoint=checkpoint, threads=threads)
    assert isinstance(e.value.cause, CheckpointError), e.value
    return str(e.value.cause)


def damage(path, at=None):
    with open(path, "r+b") as f:
        size = f.seek(0, 2)
        f.seek(size // 2 if at is None else at)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_a_damaged_newest_manifest_falls_back_to_the_snapshot_before(two_snapshots, reference):
    newest = os.path.join(two_snapshots, "manifest-00000002.json")
    with open(newest, "r+") as f:                       # torn: cut in the middle
        f.truncate(f.seek(0, 2) // 2)
    with pytest.warns(RuntimeWarning, match="manifest-00000002.json") as w:
        resumed = ts.execute(counting(), checkpoint=two_snapshots, threads=2)
    assert "manifest-00000001.json" in str(w[0].message)
    assert [r for r, _ in resumed] == [3, 3]
    assert outputs(resumed, 3) == [x for x in reference if x[0] >= 3]


def test_an_edited_manifest_is_damaged_too(two_snapshots):
    newest = os.path.join(two_snapshots, "manifest-00000002.json")
    with open(newest) as f:
        document = json.load(f)
    document["time"] = 5                                # valid JSON, wrong contents
    with open(newest, "w") as f:
        json.dump(document, f)
    with pytest.warns(RuntimeWarning, match=r"manifest-00000002.json: the manifest is damaged"):
        resumed = ts.execute(counting(), checkpoint=two_snapshots, threads=2)
    assert [r for r, _ in resumed] == [3, 3]


def test_a_damaged_state_file_falls_back_to_the_snapshot_before(two_snapshots, reference):
    (state_file,) = glob.glob(os.path.join(two_snapshots, "snapshot-00000002", "worker-1", "*.parquet"))
    damage(state_file)
    with pytest.warns(RuntimeWarning, match=f"{os.path.basename(state_file)}: the state file is damaged"):
        resumed = ts.execute(counting(), checkpoint=two_snapshots, threads=2)
    assert [r for r, _ in resumed] == [3, 3]
    assert outputs(resumed, 3) == [x for x in reference if x[0] >= 3]


def test_nothing_usable_is_an_error_naming_every_file(two_snapshots):
    os.remove(glob.glob(os.path.join(two_snapshots, "snapshot-00000001", "worker-0", "*.parquet"))[0])
    with open(os.path.join(two_snapshots, "manifest-00000002.json"), "w") as f:
        f.write("{")
    message = restore_error(two_snapshots)
    assert "no usable snapshot" in message
    assert "manifest-00000002.json: cannot read the manifest" in message
    assert "snapshot-00000001/worker-0" in message and "cannot read the state file" in message


def test_a_checkpoint_of_another_dataflow_is_refused(two_snapshots):
    message = restore_error(two_snapshots, counting(extra=True))
    assert "manifest-00000002.json" in message and "differs from the snapshot's" in message
    assert "'Map'" in message and "'RunningCount'" in message


def test_an_operator_of_another_name_is_refused(two_snapshots):
    message = restore_error(two_snapshots, counting(name="Tally"))
    assert "manifest-00000002.json" in message
    assert "operator 'Tally' at 1.2 here, 'RunningCount' at 1.2 in the snapshot" in message


def test_another_state_schema_is_refused(two_snapshots):
    schema = pa.schema([(ts.KEY_HASH, pa.uint64()), ("key", pa.string()), ("count", pa.int32()),
                        ("time", pa.int64())])
    message = restore_error(two_snapshots, counting(schema=schema))
    assert ".parquet" in message and "count: int32" in message and "count: int64" in message


def test_keyed_state_into_an_unkeyed_operator_is_refused(two_snapshots):
    message = restore_error(two_snapshots, counting(keyed=False))
    assert "'RunningCount'" in message and "unkeyed state here, keyed state in the snapshot" in message


def test_unkeyed_into_another_count_is_a_restore_error(two_snapshots, tmp_path):
    checkpoint = str(tmp_path / "unkeyed")
    ts.execute(counting(stop_after=2, keyed=False), checkpoint=checkpoint, threads=3)
    with pytest.raises(ts.WorkerError) as e:
        ts.execute(counting(keyed=False), checkpoint=checkpoint, threads=1)
    assert isinstance(e.value.cause, RestoreError) and "'RunningCount'" in str(e.value.cause)


def test_a_top_level_feedback_loop_cannot_be_checkpointed(tmp_path):
    def work(worker):
        def build(scope):
            handle, cycle = scope.feedback(1)
            scope.to_stream([3]).concat(cycle).map(lambda x: x - 1).filter(lambda x: x > 0).connect_loop(handle)
        worker.dataflow(build)

    ts.execute(work)                                    # fine without a checkpoint
    message = restore_error(str(tmp_path), work, threads=1)
    assert "feedback edge in its top scope" in message and "iterative()" in message


def test_read_snapshot_shows_operators_times_and_keyed_rows(two_snapshots):
    summary = ts.state.read_snapshot(two_snapshots)
    assert summary.column("time").to_pylist() == [6, 6]
    assert summary.column("operator").to_pylist() == ["RunningCount"] * 2
    assert summary.column("keyed").to_pylist() == [True, True] and summary.column("worker").to_pylist() == [0, 1]
    rows = ts.state.read_snapshot(two_snapshots, "RunningCount")
    assert rows.column_names == ["worker", ts.KEY_HASH, "key", "count", "time"]
    assert sum(rows.column("count").to_pylist()) == sum(len(k) for k in map(_keys, range(6)))
    for worker, key_hash in zip(rows.column("worker").to_pylist(), rows.column(ts.KEY_HASH).to_pylist()):
        assert key_hash % 2 == worker
    with pytest.raises(KeyError, match="RunningCount"):
        ts.state.read_snapshot(two_snapshots, "Nope")


def _keys(epoch):
    from .helpers import keys_of
    return keys_of(epoch)


def whole_stream_sum(scope):
    """``(input, sums)``: an operator "WholeStreamSum" keeping state that holds time 0
    until its input ends, then sends the sum of everything it got."""
    inp, stream = scope.new_input()
    b = ts.OperatorBuilder(scope, "WholeStreamSum")
    port = b.new_input(stream)
    out, summed = b.new_output()
    cap, total = [b.initial_capability()], [0]
    b.keep_state(lambda t: total[0])

    def logic():
        for _, batch in port:
            total[0] += sum(batch)
        if cap and not port.frontier.elements():
            out.session(cap.pop()).give(total[0])
    b.build(logic, notify=True)
    return inp, summed


def test_a_snapshot_that_cannot_complete_says_which_operator_holds_it(tmp_path, monkeypatch):
    from timely_spark.state import manager
    monkeypatch.setattr(manager, "SNAPSHOT_STALL", 0.2)

    def work(worker):
        inp = worker.dataflow(lambda scope: whole_stream_sum(scope)[0])
        for epoch in range(3):
            inp.send(epoch)
            inp.advance_to(epoch + 1)
        worker.step_while(lambda: not record, timeout=30)          # a snapshot at 3 begins, and waits

    with pytest.warns(RuntimeWarning, match=r"operator 'WholeStreamSum' \(\S+\) holds a capability at 0") as record:
        with pytest.raises(ts.RunTimeout):
            ts.execute(work, checkpoint=str(tmp_path), snapshot_every=0.01, timeout=2)


def keeper(save, keyed=False, time=0):
    """A worker function whose one operator keeps the state ``save`` returns."""
    def work(worker):
        def build(scope):
            inp, stream = scope.new_input()
            b = ts.OperatorBuilder(scope, "Keeper")
            b.new_input(stream)
            b.keep_state(save, keyed=keyed)
            b.build(lambda: None)
            return inp
        worker.dataflow(build, time=time)
    return work


@pytest.mark.parametrize("save, keyed, expected", [
    (lambda t: {"f": lambda x: x}, False, r"operator 'Keeper' \(1.2, dataflow 0\): its state \(a dict\) cannot be"),
    (lambda t: pa.table({"key": ["a"]}), True, r"operator 'Keeper' .* uint64 column '_key_hash'.*no such column"),
    (lambda t: pa.table({ts.KEY_HASH: [1]}), True, r"operator 'Keeper' .* uint64 column '_key_hash'.*found: int64"),
    (lambda t: {"a": 1}, True, r"operator 'Keeper' .* must return a pyarrow.Table .* it returned dict"),
    (lambda t: pa.table({"x": pa.array([pa.MonthDayNano([1, 2, 3])], pa.month_day_nano_interval())}), False,
     r"operator 'Keeper' \(1.2, dataflow 0\): its state cannot be written to .*0-1.2.parquet.*month_day_nano"),
], ids=["unpicklable", "no-key-hash", "signed-key-hash", "not-a-table", "not-parquet"])
def test_state_that_cannot_be_saved_is_an_error_naming_the_operator(tmp_path, save, keyed, expected):
    with pytest.raises(ts.WorkerError) as e:
        ts.execute(keeper(save, keyed), checkpoint=str(tmp_path))
    assert isinstance(e.value.cause, CheckpointError)
    assert re.search(expected, str(e.value.cause)), str(e.value.cause)


def test_a_dataflow_with_tuple_times_cannot_be_checkpointed(tmp_path):
    ts.execute(keeper(lambda t: 0, time=(0, 0)))
    message = restore_error(str(tmp_path), keeper(lambda t: 0, time=(0, 0)), threads=1)
    assert "tuple times at its top" in message and "integer times" in message


def test_a_final_snapshot_that_cannot_complete_held_is_taken_once_the_inputs_end(tmp_path, monkeypatch):
    """An operator holding time 0 until its input ends keeps the final snapshot (which
    holds the closed inputs at their last time) from completing: after SNAPSHOT_STALL
    the worker warns, the inputs stop holding, and the run finishes with a final
    snapshot of the drained dataflow -- not a hang."""
    from timely_spark.state import manager

    from .helpers import manifests
    monkeypatch.setattr(manager, "SNAPSHOT_STALL", 0.2)

    def work(worker):
        sent = []

        def build(scope):
            inp, summed = whole_stream_sum(scope)
            summed.inspect(sent.append)
            return inp

        inp = worker.dataflow(build)
        for epoch in range(3):
            inp.send(epoch)
            inp.advance_to(epoch + 1)
        return sent

    with pytest.warns(RuntimeWarning, match=r"holds a capability at 0.*final snapshot: the closed inputs stop"):
        assert ts.execute(work, checkpoint=str(tmp_path), timeout=20) == [[3]]
    assert len(manifests(str(tmp_path))) == 1


def test_read_snapshot_of_state_whose_class_is_gone_names_the_file(tmp_path, monkeypatch):
    """A debugging reader in another session may not import an operator's state class:
    the rows still show (the reader never unpickles: it names what the pickle would
    import, and gives the bytes)."""
    import sys

    module = tmp_path / "gone_state_mod.py"
    module.write_text("class Box:\n    def __init__(self, n):\n        self.n = n\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import gone_state_mod

    checkpoint = str(tmp_path / "ckpt")

    def work(worker):
        def build(scope):
            inp, stream = scope.new_input()
            b = ts.OperatorBuilder(scope, "Boxed")
            port = b.new_input(stream, ts.Pipeline)
            b.keep_state(lambda t: gone_state_mod.Box(t))
            b.build(lambda: port.take())
            return inp
        worker.dataflow(build).advance_to(2)

    ts.execute(work, checkpoint=checkpoint)
    monkeypatch.delitem(sys.modules, "gone_state_mod")
    sys.path.remove(str(tmp_path))
    [summary] = ts.state.read_snapshot(checkpoint).column("summary").to_pylist()
    assert "imports gone_state_mod.Box" in summary
    [row] = ts.state.read_snapshot(checkpoint, "Boxed").to_pylist()
    assert "imports gone_state_mod.Box" in row["summary"] and b"gone_state_mod" in row["data"]
