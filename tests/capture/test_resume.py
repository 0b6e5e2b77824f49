"""A Parquet event log resumed by a restored run: every epoch exactly once
(timely_spark.capture.resume, ParquetEventWriter.restore)."""

from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from timely_spark.capture import LogIndex, Messages, ParquetEventWriter, Progress
from timely_spark.capture.resume import resume_worker
from timely_spark.errors import EventLogError, RestoreError
from timely_spark.progress import Antichain

EPOCHS = 8


def rows(worker, epoch):
    return [{"w": worker, "e": epoch, "j": j} for j in range(2)]


def complete_rows(path):
    """The rows of every complete time, as a reader of complete times sees them, with the frontier."""
    snap = LogIndex(path).snapshot()
    out = []
    for scan in snap.complete():
        table = pq.read_table(scan.path)
        table = table.filter(pc.equal(table["kind"], 0))
        if scan.times is not None:
            table = table.filter(pc.is_in(table["time"], value_set=pa.array(scan.times, pa.int64())))
        out += [(r["e"], r["w"], r["j"]) for r in table.select(["e", "w", "j"]).to_pylist()]
    return Counter(out), snap.frontier


def run_epochs(writer, worker, epochs, start=0, close=True):
    """What the capture of a run pushes: its frontier from ``start`` on, each epoch's rows."""
    writer.push(Progress([(0, -1), (start, 1)] if start else []))
    for e in epochs:
        writer.push(Messages(e, rows(worker, e)))
        writer.push(Progress([(e, -1), (e + 1, 1)]))
    if close:
        writer.push(Progress([(epochs[-1] + 1, -1)]))
        writer.close()


def crashed_log(path):
    """Two workers; epochs 0..4 complete; worker 0 went on to 7 with epoch 5 and 6 written,
    worker 1 wrote half of epoch 5 (its rows, no progress) when the run died."""
    w0 = ParquetEventWriter(path, worker=0, peers=2, flush_seconds=0.0)
    w1 = ParquetEventWriter(path, worker=1, peers=2, flush_seconds=0.0)
    run_epochs(w0, 0, range(7), close=False)
    run_epochs(w1, 1, range(5), close=False)
    w1.push(Messages(5, rows(1, 5)))
    w0.flush(), w1.flush()


def expected(epochs):
    return Counter((e, w, j) for e in epochs for w in range(2) for j in range(2))


def test_restored_writers_write_every_epoch_once(tmp_path):
    path = tmp_path / "log"
    crashed_log(path)
    before, frontier = complete_rows(path)
    assert frontier.elements() == [5] and before == expected(range(5))
    # restored at a snapshot of time 3: the run sends epochs 3.. again, on both workers
    writers = [ParquetEventWriter(path, worker=i, peers=2, flush_seconds=0.0) for i in range(2)]
    for w in writers:
        w.restore(3)
    assert complete_rows(path) == (before, frontier)        # the cut moves nothing a reader sees
    for i, w in enumerate(writers):
        run_epochs(w, i, range(3, EPOCHS), start=3)
    after, frontier = complete_rows(path)
    assert frontier.elements() == []
    assert after == expected(range(EPOCHS))                   # every epoch once, the same rows


def test_cut_is_the_snapshot_time_when_the_log_lags(tmp_path):
    """A worker whose progress never reached the log (it had no record) holds the log's
    frontier back; the snapshot's time still bounds what the run sends again."""
    path = tmp_path / "log"
    w0 = ParquetEventWriter(path, worker=0, peers=2, flush_seconds=0.0)
    w1 = ParquetEventWriter(path, worker=1, peers=2, flush_seconds=0.0)
    run_epochs(w0, 0, range(4), close=False)
    run_epochs(w1, 1, range(1), close=False)       # worker 1's stream stops at 1, the log's frontier too
    w0.flush(), w1.flush()
    del w0, w1                                      # the run dies: its writers' holds on the log end with it
    points = [resume_worker(path, i, 2, 3, grace=0.0) for i in range(2)]
    assert [p.cutoff.elements() for p in points] == [[3], [3]]
    writers = [ParquetEventWriter(path, worker=i, peers=2, flush_seconds=0.0) for i in range(2)]
    for w in writers:
        w.restore(3)
        w.flush()
    assert complete_rows(path) == (expected(range(1)) + Counter((e, 0, j) for e in (1, 2) for j in range(2)),
                                   Antichain([3]))
    for i, w in enumerate(writers):
        run_epochs(w, i, range(3, 5), start=3)
    assert complete_rows(path)[0] == expected(range(1)) + Counter((e, 0, j) for e in (1, 2) for j in range(2)) \
        + expected(range(3, 5))


def test_resume_removes_incomplete_rows_and_replaced_files_after_grace(tmp_path):
    path = tmp_path / "log"
    crashed_log(path)
    old = sorted(p.name for p in (path / "worker=0").glob("part-*"))
    w = ParquetEventWriter(path, worker=0, peers=2, flush_seconds=0.0)
    w.restore(3, grace=0.0)
    ranged = [p.name for p in (path / "worker=0").glob("part-*-*")]
    assert len(ranged) == 1 and set(old) <= {p.name for p in (path / "worker=0").glob("part-*")}
    snap = LogIndex(path).snapshot()
    assert not any(t >= 5 for p in snap.parts if p.worker == 0 for t in p.times)   # epochs 5, 6 of worker 0 gone
    assert complete_rows(path)[0] == expected(range(5))
    w.push(Messages(3, rows(0, 3)))                    # dropped: the log has epoch 3
    w.flush()
    left = {p.name for p in (path / "worker=0").glob("part-*")}
    assert left == set(old) - {p for p in old if p >= ranged[0][:len("part-000000")]} | set(ranged)
    assert complete_rows(path)[0] == expected(range(5))


def test_resharded_restore_is_refused_naming_the_log_and_counts(tmp_path):
    path = tmp_path / "log"
    crashed_log(path)
    w = ParquetEventWriter(path, worker=0, peers=3)
    with pytest.raises(RestoreError, match=r"captured by 2 workers, but the restored run has 3"):
        w.restore(3)


def test_fresh_writer_still_refuses_an_existing_log(tmp_path):
    path = tmp_path / "log"
    crashed_log(path)
    w = ParquetEventWriter(path, worker=0, peers=2)
    with pytest.raises(EventLogError, match="already holds an event log"):
        w.push(Progress([(0, -1), (1, 1)]))


def test_closed_log_takes_nothing_more(tmp_path):
    path = tmp_path / "log"
    writers = [ParquetEventWriter(path, worker=i, peers=2, flush_seconds=0.0) for i in range(2)]
    for i, w in enumerate(writers):
        run_epochs(w, i, range(3))
    files = sorted(p.name for p in path.rglob("part-*"))
    for i in range(2):
        w = ParquetEventWriter(path, worker=i, peers=2, flush_seconds=0.0)
        w.restore(1)
        run_epochs(w, i, range(1, 3), start=1)
    assert sorted(p.name for p in path.rglob("part-*")) == files
    assert complete_rows(path)[0] == expected(range(3))


def test_a_second_failure_resumes_the_resumed_log(tmp_path):
    """Killed again after a restore, before the restored run completed anything: the
    range file of the first restore is replaced by a new one, never rewritten."""
    path = tmp_path / "log"
    crashed_log(path)
    for attempt in range(3):
        before = {p.name: p.stat().st_ino for p in path.rglob("part-*")}
        writers = [ParquetEventWriter(path, worker=i, peers=2, flush_seconds=0.0) for i in range(2)]
        for w in writers:
            w.restore(3)
        after = {p.name: p.stat().st_ino for p in path.rglob("part-*")}
        assert all(after[n] == ino for n, ino in before.items() if n in after)      # no file rewritten in place
        for i, w in enumerate(writers):
            run_epochs(w, i, range(3, 6), start=3, close=False)
            w.push(Messages(6, rows(i, 6)))                # half of epoch 6 again, then the crash
            w.flush()
        del writers, w                                 # the attempt dies, and its holds on the log
    assert complete_rows(path) == (expected(range(6)), Antichain([6]))
    for i, w in enumerate(ParquetEventWriter(path, worker=i, peers=2, flush_seconds=0.0) for i in range(2)):
        w.restore(4)
        run_epochs(w, i, range(4, EPOCHS), start=4)
    assert complete_rows(path) == (expected(range(EPOCHS)), Antichain())


def test_a_fresh_attempt_of_the_same_checkpoint_goes_on_from_the_start(tmp_path):
    """An attempt that died before its first snapshot: the next one starts afresh with the
    same checkpoint and goes on with the log its files name (every epoch once); a log
    written under another checkpoint (or none) is refused."""
    path, ckpt = tmp_path / "log", str(tmp_path / "ckpt")
    writers = [ParquetEventWriter(path, worker=i, peers=2, flush_seconds=0.0) for i in range(2)]
    for i, w in enumerate(writers):
        w.recover(ckpt, None, 0)
        run_epochs(w, i, range(3 + i), close=False)      # worker 1 one epoch ahead: epochs 0..2 complete
        w.push(Messages(3 + i, rows(i, 3 + i)))
        w.flush()
    del writers, w                                      # the attempt dies, and its holds on the log
    other = ParquetEventWriter(path, worker=0, peers=2)
    other.recover(str(tmp_path / "elsewhere"), None, 0)
    with pytest.raises(EventLogError, match="already holds an event log"):
        other.push(Progress([(0, -1)]))
    del other
    for i in range(2):
        w = ParquetEventWriter(path, worker=i, peers=2, flush_seconds=0.0)
        w.recover(ckpt, None, 0)
        run_epochs(w, i, range(EPOCHS))
    assert complete_rows(path) == (expected(range(EPOCHS)), Antichain())


def test_a_snapshot_flushes_the_capture_writer(tmp_path):
    """A writer that flushes rarely still has every time before a snapshot's in its log
    once the snapshot is committed (capture_into flushes it when the snapshot is taken)."""
    import json
    import time

    import timely_spark as ts

    log, ckpt = tmp_path / "log", tmp_path / "ckpt"

    def work(worker):
        writer = ParquetEventWriter(log, flush_seconds=3600.0)

        def build(scope):
            inp, stream = scope.new_input()
            stream.capture_into(writer)
            return inp, stream.probe()

        inp, probe = worker.dataflow(build)
        for e in range(4):
            inp.send_batch(rows(0, e))
            inp.advance_to(e + 1)
            worker.step_while(lambda: probe.less_than(inp.time), timeout=60)
        deadline = time.monotonic() + 60
        while not list(ckpt.glob("manifest-*.json")) and time.monotonic() < deadline:
            worker.step()
        manifest = sorted(ckpt.glob("manifest-*.json"))[0]
        frontier = LogIndex(log).snapshot().frontier.elements()     # before the writer's own flush or close
        inp.close()
        worker.step_while(lambda: not probe.done(), timeout=60)
        writer.close()
        return json.loads(manifest.read_text())["time"], frontier

    [(t, frontier)] = ts.execute(work, checkpoint=str(ckpt), snapshot_every=0.05, timeout=120)
    assert t >= 1 and frontier and frontier[0] >= t


@pytest.mark.parametrize("owner", [None, "elsewhere"])
def test_a_restored_run_refuses_a_log_written_under_another_checkpoint(tmp_path, owner):
    """A restored run (restored_time set) capturing into a path that holds a log of another
    run (written without a checkpoint, or under another one) must not cut that log and
    drop its own output in favour of the foreign rows: the first write is refused."""
    path, ckpt = tmp_path / "log", str(tmp_path / "ckpt")
    for i in range(2):
        w = ParquetEventWriter(path, worker=i, peers=2, flush_seconds=0.0)
        if owner is not None:
            w.recover(str(tmp_path / owner), None, 0)
        run_epochs(w, i, range(6), close=False)
        w.flush()
    before = sorted(p.name for p in (path / "worker=0").iterdir())
    w = ParquetEventWriter(path, worker=0, peers=2, flush_seconds=0.0)
    w.recover(ckpt, 2, 0)
    with pytest.raises(EventLogError, match=r"already holds an event log.*written (without a checkpoint|under)"):
        w.push(Progress([(0, -1), (2, 1)]))
    assert sorted(p.name for p in (path / "worker=0").iterdir()) == before     # the foreign log untouched
