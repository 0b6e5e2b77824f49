"""A full disk while writing a log's part file or a snapshot's manifest or state file
fails with the package's error naming the file (not just the worker), and leaves no
temporary file.  The disk is really full: the file is a symbolic link to /dev/full,
where every write fails with ENOSPC."""

import os

import pytest

import timely_spark as ts
from timely_spark.capture import Messages, ParquetEventWriter, Progress
from timely_spark.errors import CheckpointError, EventLogError

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")


def test_a_full_disk_under_a_part_file_names_it(tmp_path):
    w = ParquetEventWriter(tmp_path, flush_seconds=0.0)
    tmp = tmp_path / "worker=0" / ".part-000000.parquet.tmp"
    os.symlink("/dev/full", tmp)
    w.push(Messages(0, [{"n": 1}]))
    with pytest.raises(EventLogError) as e:
        w.push(Progress([(0, -1)]))
    assert str(tmp_path / "worker=0" / "part-000000.parquet") in str(e.value)
    assert "No space left on device" in str(e.value)
    assert not os.path.lexists(tmp) and not (tmp_path / "worker=0" / "part-000000.parquet").exists()


def keeping(worker):
    def build(scope):
        inp, stream = scope.new_input()
        b = ts.OperatorBuilder(scope, "Kept")
        b.new_input(stream)
        b.keep_state(lambda t: {"at": t})
        b.build(lambda: None)
        return inp
    worker.dataflow(build).advance_to(2)


def test_a_full_disk_under_a_manifest_names_it(tmp_path):
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    full = checkpoint / f"manifest-00000001.json.tmp-{os.getpid()}"     # worker 0's temporary manifest
    os.symlink("/dev/full", full)
    with pytest.raises(ts.WorkerError) as e:
        ts.execute(keeping, checkpoint=str(checkpoint), timeout=60)
    cause = e.value.cause
    assert isinstance(cause, CheckpointError)
    assert str(checkpoint / "manifest-00000001.json") in str(cause) and "No space left on device" in str(cause)
    assert not any(name.startswith("manifest-") for name in os.listdir(checkpoint))


def test_a_full_disk_under_a_state_file_names_it(tmp_path):
    from timely_spark.dataflow.state_hook import KeptState
    from timely_spark.state.store import Saved, write_saved

    os.symlink("/dev/full", tmp_path / "0-1.2.pkl")
    with pytest.raises(CheckpointError) as e:
        write_saved(Saved(KeptState(0, (1, 2), "Kept", print), "pickle", data=b"state"), str(tmp_path),
                    "0-1.2.pkl", 0, b"k" * 32)
    assert str(tmp_path / "0-1.2.pkl") in str(e.value) and "No space left on device" in str(e.value)
