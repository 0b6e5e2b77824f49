"""A long ``follow`` of a live event log that is compacted while it is written: the
follower's memory over time, and every row exactly once.

Three processes: a writer appends one epoch (``--rows`` rows, one part file) to a
Parquet event log ``--files-per-second`` times a second for ``--minutes`` minutes, then
closes the log; a follower (its own process, ``ts.execute`` with one worker) runs
``ts.capture.follow`` over the log until it is closed and counts, per batch (vectorized),
every row ``(epoch, i)`` it is given; this process compacts the log every
``--compact-every`` seconds (``ts.capture.compact`` with its defaults: the replaced
files stay for the grace period, then go) and reads the follower's resident memory
(``VmRSS``) every minute (the follower logs, on stderr, its Arrow pool's bytes and
Python's allocated blocks each minute).  It prints the per-minute RSS table (and the change since the
first minute), what compaction wrote (the parts its new files cover, per part the writer
wrote: how many times a part was rewritten, and their megabytes), and the exactly-once
check: every row of every epoch the writer wrote delivered once, none twice, none at
another time.

    python jobs/benchmarks/bench_follow_soak.py [--minutes 10] [--files-per-second 10] [--rows 100]

Rates depend on the machine's load; RSS and exactness do not.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCHEMA_FIELDS = [("epoch", "int64"), ("i", "int64")]
START_WAIT = 60.0        # seconds the follower waits for the log's first file
END_WAIT = 600.0         # seconds the follower may take after the writer's end to catch up


def schema():
    import pyarrow as pa
    return pa.schema([(name, getattr(pa, kind)()) for name, kind in SCHEMA_FIELDS])


def write(path: str, minutes: float, files_per_second: float, rows: int) -> None:
    """The writer: one epoch (one part file) every ``1/files_per_second`` s, then close."""
    import numpy as np
    import pyarrow as pa

    from timely_spark.capture import Messages, ParquetEventWriter, Progress

    w = ParquetEventWriter(path, flush_seconds=0.0, schema=schema())
    i = pa.array(np.arange(rows, dtype=np.int64))
    start, e = time.monotonic(), 0
    while time.monotonic() - start < minutes * 60:
        batch = pa.record_batch([pa.array(np.full(rows, e, dtype=np.int64)), i], schema=schema())
        w.push(Messages(e, [batch]))
        w.push(Progress([(e, -1), (e + 1, 1)]))
        e += 1
        time.sleep(max(0.0, start + e / files_per_second - time.monotonic()))
    w.push(Progress([(e, -1)]))
    w.close()
    print(json.dumps({"epochs": e, "rows": e * rows}), flush=True)


def follow_all(path: str, capacity: int, rows: int, timeout: float) -> None:
    """The follower: every row of the log, counted once per delivery (a fixed-size
    array, so the check itself adds no memory as the run goes on)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    import timely_spark as ts
    from timely_spark.capture import follow

    seen = np.zeros(capacity * rows, dtype=np.uint8)
    wrong = {"time": 0, "range": 0, "batches": 0}
    heap = {"next": time.monotonic() + 60}

    def count(t, batches):
        if time.monotonic() >= heap["next"]:        # where the memory is: Arrow's pool or Python's heap
            heap["next"] += 60
            print(json.dumps({"heap": {"arrow_mb": round(pa.total_allocated_bytes() / 2**20, 1),
                                       "python_blocks": sys.getallocatedblocks(), "epoch": t}}),
                  file=sys.stderr, flush=True)
        for b in batches:
            wrong["batches"] += 1
            epoch, i = b.column(0), b.column(1).to_numpy()
            if b.num_rows and not pc.all(pc.equal(epoch, t)).as_py():
                wrong["time"] += 1
            ok = (t < capacity) & (i >= 0) & (i < rows)
            if not ok.all():
                wrong["range"] += int((~ok).sum())
            np.add.at(seen, t * rows + i[ok], 1)

    def work(worker):
        probe = worker.dataflow(lambda s: follow(path, s, start_wait=START_WAIT).inspect_batch(count).probe())
        worker.step_while(lambda: not probe.done(), timeout=timeout)

    ts.execute(work, timeout=timeout)
    per_epoch = seen.reshape(capacity, rows)
    delivered = np.flatnonzero(per_epoch.any(axis=1))
    last = int(delivered[-1]) + 1 if len(delivered) else 0
    print(json.dumps({"rows": int(seen.sum()), "doubled": int((seen > 1).sum()),
                      "epochs_seen": int(len(delivered)), "missing_below_last": int((seen[:last * rows] == 0).sum()),
                      "last_epoch": last - 1, "batches": wrong["batches"], "wrong_time": wrong["time"],
                      "out_of_range": wrong["range"]}), flush=True)


def rss_mb(pid: int) -> float:
    """The resident memory of process ``pid`` in MB (``VmRSS`` of /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--files-per-second", type=float, default=10.0)
    p.add_argument("--rows", type=int, default=100, help="rows per epoch (per part file)")
    p.add_argument("--compact-every", type=float, default=5.0, help="seconds between compactions")
    p.add_argument("--role", choices=["writer", "follower"], help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    p.add_argument("--capacity", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.role == "writer":
        return write(args.path, args.minutes, args.files_per_second, args.rows)
    if args.role == "follower":
        return follow_all(args.path, args.capacity, args.rows, args.minutes * 60 + END_WAIT)

    from timely_spark.capture import compact
    from timely_spark.capture.log_files import part_range

    tmp = tempfile.TemporaryDirectory(prefix="follow-soak-")
    path = str(Path(tmp.name) / "log")
    capacity = int(args.minutes * 60 * args.files_per_second) + 10
    common = [sys.executable, __file__, "--path", path, "--minutes", str(args.minutes), "--rows", str(args.rows),
              "--files-per-second", str(args.files_per_second)]
    writer = subprocess.Popen(common + ["--role", "writer"], stdout=subprocess.PIPE, text=True)
    follower = subprocess.Popen(common + ["--role", "follower", "--capacity", str(capacity)],
                                stdout=subprocess.PIPE, text=True)
    totals = {"compactions": 0, "compacted": 0, "removed": 0, "parts": 0, "bytes": 0}
    made: set = set()                       # the compacted files seen so far
    samples = []
    start = time.monotonic()
    try:
        next_sample, next_compact = start + 60, start + args.compact_every
        print(f"writing {args.files_per_second:g} files/s of {args.rows} rows for {args.minutes:g} min; "
              f"compacting every {args.compact_every:g} s; follower pid {follower.pid}", flush=True)
        while follower.poll() is None:
            now = time.monotonic()
            if now >= next_compact and writer.poll() is None and Path(path).exists():
                counts = compact(path)
                totals["compactions"] += 1
                totals["compacted"] += counts["compacted"]
                totals["removed"] += counts["removed"]
                for f in Path(path).glob("worker=*/part-*-*.parquet"):
                    span = part_range(f.name)
                    if span is not None and f.name not in made:
                        made.add(f.name)
                        totals["parts"] += span[1] - span[0] + 1
                        totals["bytes"] += f.stat().st_size
                next_compact = now + args.compact_every
            if now >= next_sample:
                files = sum(1 for _ in Path(path).rglob("part-*.parquet"))
                samples.append((round((now - start) / 60, 1), rss_mb(follower.pid), files, totals["compactions"]))
                print(f"  minute {samples[-1][0]:5.1f}: follower RSS {samples[-1][1]:7.1f} MB, "
                      f"{files} part files, {totals['compactions']} compactions", flush=True)
                next_sample += 60
            time.sleep(0.2)
            if now - start > args.minutes * 60 + END_WAIT:
                raise TimeoutError("the follower did not end")
        written = json.loads(writer.communicate(timeout=60)[0])
        got = json.loads(follower.communicate(timeout=60)[0])
    finally:
        for proc in (writer, follower):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        tmp.cleanup()

    print("\nminute  follower RSS (MB)  change since minute 1 (MB)  part files  compactions")
    for minute, rss, files, n in samples:
        print(f"{minute:6.1f}  {rss:17.1f}  {rss - samples[0][1]:+26.1f}  {files:10d}  {n:11d}")
    if len(samples) > 1:
        later = [rss for _, rss, _, _ in samples]
        print(f"RSS after the first minute: min {min(later):.1f} MB, max {max(later):.1f} MB, "
              f"spread {max(later) - min(later):.1f} MB")
    print(f"\nwriter: {written['epochs']} epochs, {written['rows']} rows; compaction: {totals['compactions']} runs, "
          f"{totals['compacted']} files compacted, {totals['removed']} replaced files removed; its new files "
          f"cover {totals['parts']} parts ({totals['parts'] / max(1, written['epochs']):.1f} per part written), "
          f"{totals['bytes'] / 2**20:.1f} MB")
    print(f"follower: {got['rows']} rows in {got['epochs_seen']} epochs ({got['batches']} batches); "
          f"doubled {got['doubled']}, missing {got['missing_below_last']}, at a wrong time {got['wrong_time']}, "
          f"out of range {got['out_of_range']}")
    exact = (got["rows"] == written["rows"] and got["epochs_seen"] == written["epochs"] and got["doubled"] == 0
             and got["missing_below_last"] == 0 and got["wrong_time"] == 0 and got["out_of_range"] == 0)
    print(f"exactly once: {'yes' if exact else 'NO'}")
    if not exact:
        sys.exit(1)


if __name__ == "__main__":
    main()
