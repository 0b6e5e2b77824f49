"""The epoch log under the Structured Streaming sink, on real files: an epoch is visible
whole or not at all (a commit that cannot put every one of its files in place fails
and shows nothing); committing an epoch complete already leaves the log as it was; a
task staging after its batch was aborted is never seen."""

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from timely_spark.capture import LogIndex
from timely_spark.capture.epoch_files import part_name
from timely_spark.capture.epoch_log import SINK_DIR, EpochLog
from timely_spark.capture.part_file import DATA

RECORDS = pa.schema([("x", pa.int64())])
TASKS = 3


def seen(path):
    """What a reader of complete times sees: the frontier and the (time, x) rows."""
    snap = LogIndex(path).snapshot()
    rows = []
    for scan in snap.complete():
        table = pq.read_table(scan.path, columns=["kind", "time", "x"])
        table = table.filter(pc.equal(table["kind"], DATA))
        if scan.times is not None:
            table = table.filter(pc.is_in(table["time"], pa.array(scan.times, pa.int64())))
        rows += zip(table["time"].to_pylist(), table["x"].to_pylist())
    return snap.frontier.elements(), sorted(rows)


def files(path):
    """Every file of the log (staging and writer state included), with its bytes."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def staged_files(path):
    return sorted((path / SINK_DIR / "staging").glob("*/*/*.parquet"))


def stage(path, epoch, attempt=None):
    """Every task of ``epoch`` stages its rows (task t: x = 10 * epoch + t)."""
    log = EpochLog.open(path)
    return [log.stage(epoch, t, pa.table({"x": [10 * epoch + t]}), attempt=attempt) for t in range(TASKS)]


def epoch_rows(epoch):
    return [(epoch, 10 * epoch + t) for t in range(TASKS)]


@pytest.fixture
def log_with_epoch_0(tmp_path):
    path = tmp_path / "log"
    EpochLog.create(path, RECORDS)
    EpochLog.open(path).commit(0, stage(path, 0))
    assert seen(path) == ([1], epoch_rows(0))
    return path


@pytest.mark.parametrize("blocked", [0, 1, 2, "progress"])
def test_a_commit_that_cannot_put_one_of_its_files_in_place_fails_and_shows_nothing(log_with_epoch_0, blocked):
    """Epoch 1 has three data files and a progress file; whichever cannot be put in
    place (a directory stands where it goes), the commit fails naming it and readers
    see the log as before; once it can, the epoch is committed once."""
    path = log_with_epoch_0
    before = seen(path)
    base = TASKS + 1                                   # epoch 0: parts 0..2 and its progress, 3
    number = base + (TASKS if blocked == "progress" else blocked)
    blocker = path / "worker=0" / part_name(number)
    blocker.mkdir()
    with pytest.raises(OSError, match=part_name(number)):
        EpochLog.open(path).commit(1, stage(path, 1, attempt="a"))
    blocker.rmdir()                                    # (a reader refuses a directory named like a part)
    assert seen(path) == before                        # what the failed commit put in place is not seen
    EpochLog.open(path).commit(1, stage(path, 1, attempt="b"))     # the batch run again
    assert seen(path) == ([2], epoch_rows(0) + epoch_rows(1))
    assert staged_files(path) == []


def test_committing_an_epoch_complete_already_leaves_the_log_as_it_was(log_with_epoch_0):
    """Spark runs a batch again after a restart when its commit reached the log but not
    the checkpoint: whether its tasks staged before the first commit (a second attempt
    of the batch) or after it, the second commit changes nothing, not a byte."""
    path = log_with_epoch_0
    early = stage(path, 1, attempt="second")           # staged before epoch 1 was committed
    EpochLog.open(path).commit(1, stage(path, 1, attempt="first"))
    after = files(path)
    assert seen(path) == ([2], epoch_rows(0) + epoch_rows(1))
    EpochLog.open(path).commit(1, stage(path, 1, attempt="again"))     # staged after: nothing staged
    assert files(path) == after
    EpochLog.open(path).commit(1, early)
    assert files(path) == after
    assert seen(path) == ([2], epoch_rows(0) + epoch_rows(1))
    EpochLog.open(path).commit(2, stage(path, 2))      # the log goes on from there
    assert seen(path) == ([3], epoch_rows(0) + epoch_rows(1) + epoch_rows(2))


def test_a_task_staging_after_its_batch_was_aborted_is_never_seen(log_with_epoch_0):
    """Spark aborts a batch when one task fails, while another task may still be
    running: its file, staged after the abort, is never visible, and goes when the
    batch, run again, commits."""
    path = log_with_epoch_0
    before = seen(path)
    log = EpochLog.open(path)
    first = log.stage(1, 0, pa.table({"x": [100]}), attempt="1")
    log.abort(1, [first, None, None])                  # task 1 failed; task 2 still running
    late = log.stage(1, 2, pa.table({"x": [102]}), attempt="3")
    assert late.file is not None and seen(path) == before
    EpochLog.open(path).commit(1, stage(path, 1, attempt="rerun"))
    assert seen(path) == ([2], epoch_rows(0) + epoch_rows(1))
    assert staged_files(path) == []
