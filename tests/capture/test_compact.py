"""ts.capture.compact: complete times rewritten into larger files while a writer appends
and a streaming reader (follow) reads -- each epoch exactly once; retention drops only
complete times and never passes the log's frontier; a reader behind a compaction
finishes on the replaced files during the grace period, then is told.

Real threads and files; every wait is bounded; no test asserts a timing."""

import threading
import time
from pathlib import Path

import pytest

import timely_spark as ts
from timely_spark.capture import LogIndex, Messages, ParquetEventReader, ParquetEventWriter, Progress, compact, follow
from timely_spark.capture.compact import COMPACT_FANOUT
from timely_spark.capture.log_files import part_range
from timely_spark.errors import EventLogError

EPOCHS = 30


def write(path, epochs, delay=0.0):
    w = ParquetEventWriter(path, flush_seconds=0.0)
    for t in range(epochs):
        w.push(Messages(t, [{"n": t * 10 + i} for i in range(3)]))
        w.push(Progress([(t, -1), (t + 1, 1)]))
        time.sleep(delay)
    return w


def test_compaction_while_the_writer_and_a_follower_run_shows_each_epoch_once(tmp_path):
    path = str(tmp_path / "log")
    done = threading.Event()
    compactions = []

    def writer():
        w = write(path, EPOCHS, delay=0.01)
        w.push(Progress([(EPOCHS, -1)]))
        w.close()
        done.set()

    def compactor():
        while not done.is_set():
            if (Path(path) / "worker=0").is_dir():
                compactions.append(compact(path, min_files=2, grace=0.0))     # replaced files go at once
            time.sleep(0.005)

    threads = [threading.Thread(target=writer, daemon=True), threading.Thread(target=compactor, daemon=True)]
    for thread in threads:
        thread.start()

    def work(worker):
        seen = []
        worker.dataflow(lambda s: follow(path, s, poll=0.005).inspect_time(lambda t, r: seen.append((t, r["n"]))))
        return seen

    results = ts.execute(work, threads=2, timeout=60)
    for thread in threads:
        thread.join(30)
    seen = sorted(x for r in results for x in r)
    assert seen == [(t, t * 10 + i) for t in range(EPOCHS) for i in range(3)]
    assert sum(c["compacted"] for c in compactions) > 0
    compact(path, min_files=2, grace=0.0)
    files = [p.name for p in (Path(path) / "worker=0").glob("part-*")]
    assert len(files) <= 2 * (COMPACT_FANOUT + 1) + 1, files     # two tiers of compacted files (and maybe its tail)
    snap = LogIndex(path).snapshot()
    assert not snap.frontier and sum(s.rows for s in snap.complete()) == 3 * EPOCHS


def test_retention_drops_only_complete_times_and_never_passes_the_frontier(tmp_path):
    path = str(tmp_path / "log")
    w = write(path, 5)                 # frontier 5; time 5 gets data but is not complete
    w.push(Messages(5, [{"n": 99}]))
    w.flush()
    with pytest.raises(EventLogError, match="past the log's frontier"):
        compact(path, retain_before=6, grace=0.0)
    counts = compact(path, retain_before=3, min_files=2, grace=0.0)
    assert counts["dropped"] == 9
    snap = LogIndex(path).snapshot()
    assert snap.frontier.elements() == [5]
    rows = ts.capture.extract(iter(ParquetEventReader(path)))
    assert [(t, sorted(r["n"] for r in records)) for t, records in rows] == [(3, [30, 31, 32]), (4, [40, 41, 42]),
                                                                           (5, [99])]


def test_a_reader_behind_a_compaction_finishes_during_the_grace_period_then_is_told(tmp_path):
    path = str(tmp_path / "log")
    write(path, 6)
    reader, late = ParquetEventReader(path), ParquetEventReader(path)
    first = [reader.next() for _ in range(2)]           # part 0 read
    assert first[0].time == 0 and late.next().time == 0
    compact(path, min_files=2, grace=3600.0)             # replaced files kept
    rest = list(reader)
    assert ts.capture.extract(first + rest) == ts.capture.extract(iter(ParquetEventReader(path)))

    compact(path, min_files=2, grace=0.0)                # replaced files removed
    with pytest.raises(EventLogError, match=r"part-000000-000005\.parquet: compacted"):
        list(late)


def test_a_large_compacted_file_is_not_rewritten_by_the_next_compaction(tmp_path):
    import random

    rng = random.Random(3)
    w = ParquetEventWriter(tmp_path, flush_seconds=0.0)
    for t in range(10):
        rows = 2000 if t < 5 else 1                 # a large compacted head, then a small tail
        w.push(Messages(t, [{"x": rng.randrange(2 ** 62)} for _ in range(rows)]))
        w.push(Progress([(t, -1), (t + 1, 1)]))
        if t == 4:
            assert compact(tmp_path, min_files=2, grace=0.0)["compacted"] == 5
    head = tmp_path / "worker=0" / "part-000000-000004.parquet"
    written = head.stat().st_mtime_ns
    assert compact(tmp_path, min_files=2, grace=0.0)["compacted"] == 5     # parts 5..9 only
    names = sorted(p.name for p in (tmp_path / "worker=0").glob("part-*"))
    assert names == ["part-000000-000004.parquet", "part-000005-000009.parquet"]
    assert head.stat().st_mtime_ns == written
    snap = LogIndex(tmp_path).snapshot()
    assert snap.frontier.elements() == [10] and sum(s.rows for s in snap.complete()) == 10005
    assert compact(tmp_path, retain_before=3, min_files=2, grace=0.0)["dropped"] == 6000   # retention rewrites it
    assert sum(s.rows for s in LogIndex(tmp_path).snapshot().complete()) == 4005


def test_compactions_more_often_than_the_grace_period_still_remove_what_they_replaced(tmp_path):
    # each later compaction covers parts 0..3 again; they go once the first file that covered
    # them is older than the grace period, whatever the later ones (and the directory's order)
    import os

    w = write(str(tmp_path), 4)
    folder = tmp_path / "worker=0"
    assert compact(tmp_path, min_files=2, grace=60.0)["compacted"] == 4
    first = folder / "part-000000-000003.parquet"
    made = time.time() - 120.0
    os.utime(first, (made, made))                       # it appeared two minutes ago
    for t in range(4, 20):
        w.push(Messages(t, [{"n": t}]))
        w.push(Progress([(t, -1), (t + 1, 1)]))
        compact(tmp_path, min_files=2, grace=60.0)      # a new compacted file, covering parts 0..3 too
    names = {p.name for p in folder.glob("part-*")}
    assert len([n for n in names if n.count("-") == 2]) > 2, names      # later compacted files kept (grace)
    assert not names & {f"part-{i:06d}.parquet" for i in range(4)}, sorted(names)
    snap = LogIndex(tmp_path).snapshot()
    assert snap.frontier.elements() == [20] and sum(s.rows for s in snap.complete()) == 4 * 3 + 16


def test_compaction_rewrites_what_is_new_and_leaves_compacted_files_alone(tmp_path):
    w = ParquetEventWriter(tmp_path, flush_seconds=0.0)
    folder = tmp_path / "worker=0"

    def epochs(lo, hi):
        for t in range(lo, hi):
            w.push(Messages(t, [{"n": t * 10 + i} for i in range(3)]))
            w.push(Progress([(t, -1), (t + 1, 1)]))

    def names():
        return {p.name for p in folder.glob("part-*")}

    epochs(0, 8)
    assert compact(tmp_path, min_files=2, grace=0.0)["compacted"] == 8
    first = folder / "part-000000-000007.parquet"
    made = first.stat()
    epochs(8, 16)
    assert compact(tmp_path, min_files=2, grace=0.0)["compacted"] == 8              # the new files only
    assert names() == {first.name, "part-000008-000015.parquet"}
    assert (first.stat().st_ino, first.stat().st_mtime_ns) == (made.st_ino, made.st_mtime_ns)
    rewritten, rounds = 0, 40            # parts rewritten by the later compactions (each of 8 new parts)
    for k in range(2, rounds):
        epochs(8 * k, 8 * k + 8)
        before = names()
        compact(tmp_path, min_files=2, grace=0.0)
        spans = [part_range(n) for n in names() - before]
        rewritten += sum(last - first_ + 1 for first_, last in spans if last is not None)
    assert rewritten <= 4 * 8 * (rounds - 2), rewritten      # a few times each over the log's life, not each time
    assert len(names()) <= 12, sorted(names())               # a few compacted files per tier
    snap = LogIndex(tmp_path).snapshot()
    assert snap.frontier.elements() == [8 * rounds] and sum(s.rows for s in snap.complete()) == 3 * 8 * rounds
