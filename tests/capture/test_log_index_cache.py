"""The process-wide cache of part-file summaries holds only files that still exist: a
follower of a log that compaction keeps small keeps a small cache."""

import os

import timely_spark as ts
from timely_spark.capture import Messages, ParquetEventWriter, Progress
from timely_spark.capture.compact import compact
from timely_spark.capture.follow import follow
from timely_spark.capture.log_index import LogIndex, cached_part_files


def write_epochs(writer, first, count):
    for t in range(first, first + count):
        writer.push(Messages(t, [{"n": t}]))
        writer.push(Progress([(t, -1), (t + 1, 1)]))      # flush_seconds=0: one part file per epoch


def part_files_on_disk(folder):
    return sorted(n for n in os.listdir(folder) if n.startswith("part-"))


def test_the_cache_forgets_files_compaction_deleted(tmp_path):
    log, folder = str(tmp_path), str(tmp_path / "worker=0")
    w = ParquetEventWriter(log, flush_seconds=0.0)
    w.push(Progress([(0, 1), (0, -1)]))
    write_epochs(w, 0, 20)
    index = LogIndex(log)
    index.snapshot()
    assert cached_part_files(folder) == len(part_files_on_disk(folder)) == 20
    for round_ in range(3):                  # compaction after compaction, as a long follower sees
        assert compact(log, min_files=2, grace=0)["compacted"] > 0
        write_epochs(w, 20 + 5 * round_, 5)
        index.snapshot()
        assert cached_part_files(folder) == len(part_files_on_disk(folder)) < 20


def test_a_follower_under_compaction_keeps_a_small_cache(tmp_path):
    log, folder = str(tmp_path / "log"), str(tmp_path / "log" / "worker=0")
    w = ParquetEventWriter(log, flush_seconds=0.0)
    write_epochs(w, 0, 10)

    def work(worker):
        seen, sizes = [], []
        probe = worker.dataflow(lambda s: follow(log, s, poll=0.001).inspect(seen.append).probe())
        for chunk in range(1, 6):
            worker.step_while(lambda: probe.less_than(10 * chunk), timeout=60)
            sizes.append(cached_part_files(folder))
            compact(log, min_files=2, grace=0)
            write_epochs(w, 10 * chunk, 10)
        w.push(Progress([(60, -1)]))
        w.close()
        worker.step_while(lambda: not probe.done(), timeout=60)
        return seen, sizes
    [(seen, sizes)] = ts.execute(work, timeout=120)
    assert sorted(r["n"] for r in seen) == list(range(60))
    assert max(sizes) <= 20, sizes         # without forgetting: 10, 20, 30, 40, 50
