"""Checkpoint files are authenticated with the checkpoint key before a byte is parsed:
a state file or manifest written by anyone without the key is refused, naming it, and
nothing in it is unpickled; read_snapshot never unpickles; a manifest's ``kind`` must
agree with the state's declared form; integer-time window state holds no pickle."""

import glob
import hashlib
import json
import os
import pickle

import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.errors import CheckpointError
from timely_spark.state.key import file_key, mac

from .helpers import counting, outputs


def total(worker):
    """A sink keeping the sum of its complete times: unkeyed state, pickled."""
    def build(scope):
        inp, stream = scope.new_input()
        b = ts.OperatorBuilder(scope, "Total")
        port = b.new_input(stream)
        kept = b.keep_state(lambda t: totals[0])
        totals = [kept or 0]

        def logic():
            for _, batch in port:
                totals[0] += sum(batch)
        b.build(logic)
        return inp
    inp = worker.dataflow(build)
    start = worker.restored_time or 0
    for epoch in range(start, start + 3):
        inp.send_batch([epoch])
        inp.advance_to(epoch + 1)
    return worker.restored_time


class Planted:
    """A pickle that creates a file when it is loaded (what a crafted file could do)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _manifest(checkpoint):
    [path] = glob.glob(os.path.join(checkpoint, "manifest-*.json"))
    with open(path) as f:
        return path, json.load(f)


def _canonical(body):
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _plant(checkpoint, marker, recompute):
    """Replace the pickled state file with a crafted one, as anyone who can write the
    directory can; ``recompute``: also redo every unkeyed sum in the manifest."""
    [pkl] = glob.glob(os.path.join(checkpoint, "snapshot-*", "worker-0", "*.pkl"))
    data = pickle.dumps(Planted(marker), protocol=5)
    with open(pkl, "wb") as f:
        f.write(data)
    if recompute:
        path, document = _manifest(checkpoint)
        [state] = document["states"].values()
        state["files"][0]["size"] = len(data)
        body = {k: v for k, v in document.items() if k not in ("checksum", "mac")}
        document["checksum"] = hashlib.sha256(_canonical(body)).hexdigest()
        with open(path, "w") as f:
            json.dump(document, f)
    return pkl


@pytest.mark.parametrize("recompute", [False, True], ids=["file-swapped", "manifest-sums-redone"])
def test_a_crafted_pickle_is_refused_before_it_is_unpickled(tmp_path, recompute):
    checkpoint, marker = str(tmp_path / "ckpt"), str(tmp_path / "ran-code")
    ts.execute(total, checkpoint=checkpoint)
    pkl = _plant(checkpoint, marker, recompute)
    with pytest.raises(ts.WorkerError) as e:
        ts.execute(total, checkpoint=checkpoint)
    assert isinstance(e.value.cause, CheckpointError)
    message = str(e.value.cause)
    assert "not trusted" in message
    assert ("manifest-00000001.json: the manifest's MAC does not match" in message if recompute else pkl in message)
    with pytest.raises(CheckpointError):
        ts.state.read_snapshot(checkpoint)
    assert not os.path.exists(marker)


def test_a_checkpoint_restores_only_under_the_key_that_wrote_it(tmp_path, monkeypatch):
    checkpoint = str(tmp_path)
    monkeypatch.setenv("TIMELY_SPARK_SECRET", "first secret")
    ts.execute(counting(stop_after=3), checkpoint=checkpoint, threads=2)
    monkeypatch.setenv("TIMELY_SPARK_SECRET", "another secret")
    with pytest.raises(ts.WorkerError) as e:
        ts.execute(counting(), checkpoint=checkpoint, threads=2)
    assert "manifest-00000001.json: the manifest was written under another checkpoint key" in str(e.value.cause)
    assert "TIMELY_SPARK_SECRET" in str(e.value.cause)
    monkeypatch.setenv("TIMELY_SPARK_SECRET", "first secret")
    resumed = ts.execute(counting(), checkpoint=checkpoint, threads=2)
    assert [r for r, _ in resumed] == [3, 3] and outputs(resumed, 3)


def test_a_manifest_without_a_mac_is_not_trusted(tmp_path):
    checkpoint = str(tmp_path)
    ts.execute(total, checkpoint=checkpoint)
    path, document = _manifest(checkpoint)
    del document["mac"]                                    # as an older version wrote it
    with open(path, "w") as f:
        json.dump(document, f)
    with pytest.raises(ts.WorkerError, match="manifest-00000001.json: the manifest is not authenticated"):
        ts.execute(total, checkpoint=checkpoint)


def _resign(checkpoint, path, document):
    """Rewrite a manifest as a holder of the key would (valid checksum and MAC)."""
    key = file_key()
    body = {k: v for k, v in document.items() if k not in ("checksum", "mac")}
    body["checksum"] = hashlib.sha256(_canonical(body)).hexdigest()
    body["mac"] = mac(key, "manifest", _canonical(body))
    with open(path, "w") as f:
        json.dump(body, f)


def test_read_snapshot_never_unpickles_even_an_authenticated_file(tmp_path):
    checkpoint, marker = str(tmp_path / "ckpt"), str(tmp_path / "ran-code")
    ts.execute(total, checkpoint=checkpoint)
    pkl = _plant(checkpoint, marker, recompute=False)
    path, document = _manifest(checkpoint)
    [state] = document["states"].values()
    entry = state["files"][0]
    with open(pkl, "rb") as f:
        data = f.read()
    entry["size"], entry["mac"] = len(data), mac(file_key(), entry["path"], data)
    _resign(checkpoint, path, document)
    [summary] = ts.state.read_snapshot(checkpoint).column("summary").to_pylist()
    assert "imports io.open" in summary
    [row] = ts.state.read_snapshot(checkpoint, "Total").to_pylist()
    assert row["data"] == data
    assert not os.path.exists(marker)


def test_the_manifest_kind_must_agree_with_the_declared_table_state(tmp_path):
    """Keyed state is a Table: a manifest (even a key holder's) that calls it a pickle is refused."""
    checkpoint = str(tmp_path)
    ts.execute(counting(stop_after=3), checkpoint=checkpoint, threads=2)
    path, document = _manifest(checkpoint)
    [state] = document["states"].values()
    assert state["keyed"] and state["kind"] == "parquet"
    state["kind"] = "pickle"
    _resign(checkpoint, path, document)
    with pytest.raises(ts.WorkerError) as e:
        ts.execute(counting(), checkpoint=checkpoint, threads=2)
    assert "keeps its state as a pyarrow.Table (keyed), but the snapshot holds it as kind 'pickle'" \
        in str(e.value.cause)


def test_window_state_at_integer_times_holds_no_pickle(tmp_path):
    checkpoint = str(tmp_path)

    def work(worker):
        def build(scope):
            inp, stream = scope.new_input()
            stream.group_by_window("ts", every=10, keys=["k"], epoch=5).aggregate([("v", "sum")]).probe()
            return inp
        inp = worker.dataflow(build)
        inp.send(pa.record_batch({"ts": [1, 2, 15], "k": ["a", "b", "a"], "v": [1, 2, 3]}))
        inp.advance_to(1)
        worker.step_while(lambda: False)
        return None

    ts.execute(work, checkpoint=checkpoint)
    snapshot = ts.state.read_snapshot(checkpoint)
    assert set(snapshot.column("kind").to_pylist()) == {"parquet"}
    for name, address in zip(snapshot.column("operator").to_pylist(), snapshot.column("address").to_pylist()):
        table = ts.state.read_snapshot(checkpoint, address)
        assert not any(pa.types.is_binary(f.type) or pa.types.is_dictionary(f.type) for f in table.schema), \
            (name, table.schema)


def test_a_manifest_of_another_format_is_refused_naming_both_formats(tmp_path, monkeypatch):
    """Authentic, but written by a version whose state encoding differs: refused by name, never restored."""
    from timely_spark.state import manifest
    key = b"k" * 32
    body = {"time": 0, "peers": 1, "states": [], "dataflows": []}
    monkeypatch.setattr(manifest, "FORMAT", manifest.FORMAT - 1)
    path = manifest.write_manifest(str(tmp_path), 0, body, key)
    monkeypatch.undo()
    with pytest.raises(CheckpointError, match=rf"manifest format {manifest.FORMAT - 1}, this version reads "
                                              rf"{manifest.FORMAT}: .*another version of timely_spark"):
        manifest.load_manifest(path, key)
    assert manifest.load_manifest(manifest.write_manifest(str(tmp_path), 1, body, key), key)["seq"] == 1
