"""Benchmark: what snapshots cost the streaming pipeline, and their size and time.

Two parts, one run:

1. **Sustained throughput** of ``ts.spark.stream`` keeping ``ts.graph.components``
   current (the pipeline of ``bench_streaming.py``: records -> the timely sink -> a
   barrier job following its log -> the output log -> ``pipeline.df``), fed faster than
   it keeps up (``--rate`` records/s for ``--seconds``), once with no snapshot during the
   run (``snapshot_every`` longer than the run) and once with ``snapshot_every=5``, side
   by side in the same session, after a short run that is not counted (the session's
   first pipeline starts slower).
   Throughput = records / seconds from the first input file to the moment the last
   epoch's changes reached the downstream query (and, as a check, records / the whole
   run's wall time, which includes the final check).  Printed: both runs, and the
   ratios (target >= 90%).
2. **Snapshot size and time at 2 M vertices** of component state: the timely stage
   alone (:func:`follow_components` on ``ts.execute(processes=2)``) over a log of edges that
   reaches ``--vertices`` vertices, with ``snapshot_every=--every``.  A watcher polls the
   checkpoint directory: the time per snapshot is from its ``snapshot-<n>`` directory
   appearing (its files being written) to its ``manifest-<n>.json`` (the commit);
   the size is the bytes of a committed snapshot's files.  Also the timely stage's
   wall time with and without snapshots.

    python jobs/benchmarks/bench_snapshots.py                       # defaults: 60 s per pipeline run, 2 M vertices
    python jobs/benchmarks/bench_snapshots.py --seconds 20 --vertices 200000   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

import bench_streaming
import numpy as np
import pyarrow as pa

import timely_spark as ts
from timely_spark.capture import Messages, ParquetEventWriter, Progress, follow
from timely_spark.spark.pipeline import PIPELINE_POLL

_NUMBERED = re.compile(r"^(snapshot|manifest)-(\d+)(?:\.json)?$")


#: The changes log's columns (part 2).
CHANGES = pa.schema([("vertex", pa.int64()), ("component", pa.int64()), ("diff", pa.int64())])


def throughput(result: dict) -> float:
    """Records per second from the first input file to the last epoch's changes downstream."""
    seen, written = result["stages"]["seen"], result["stages"]["landed"]
    if not seen or not written:
        return float("nan")
    return result["records"] / max(1e-9, max(seen.values()) - written[0])


def pipeline_run(spark, workdir: Path, args, snapshot_every: float) -> dict:
    start = time.time()
    result = bench_streaming.timely(spark, workdir, args.seconds, args.rate, args.interval, 0, 0.0,
                                    PIPELINE_POLL, snapshot_every=snapshot_every)
    wall = time.time() - start
    return {"throughput": throughput(result), "wall": result["records"] / wall, "records": result["records"],
            "ok": result["ok"], "epochs": result["epochs"]}


def follow_components(edges_log: str, changes_log: str):
    """The timely stage alone, a worker function: follow the edges log, keep its
    components (``ts.graph.components``), capture their changes until the log is closed."""
    def work(worker) -> None:
        writer = ParquetEventWriter(changes_log, worker=worker.index, peers=worker.peers, flush_seconds=0.0,
                                    schema=CHANGES)

        def build(scope):
            labels = ts.graph.components(follow(edges_log, scope), src="src", dst="dst")
            labels.capture_into(writer)
            return labels.probe()

        probe = worker.dataflow(build)
        worker.step_while(lambda: not probe.done())
        writer.close()

    return work


class CheckpointWatcher(threading.Thread):
    """First-seen times of a checkpoint directory's ``snapshot-<n>`` and ``manifest-<n>.json``."""

    def __init__(self, folder: Path) -> None:
        super().__init__(daemon=True)
        self.folder = folder
        self.seen: dict[tuple[str, int], float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.01):
            try:
                names = os.listdir(self.folder)
            except FileNotFoundError:
                continue
            now = time.monotonic()
            for name in names:
                m = _NUMBERED.match(name)
                if m:
                    self.seen.setdefault((m.group(1), int(m.group(2))), now)

    def durations(self) -> list[float]:
        return [self.seen[("manifest", n)] - at for (kind, n), at in sorted(self.seen.items())
                if kind == "snapshot" and ("manifest", n) in self.seen]


def edges_log(path: Path, vertices: int, epochs: int, seed: int = 7) -> int:
    """A closed log of edges reaching ``vertices`` vertices: each epoch pairs up fresh
    vertices and links a few to earlier ones (components merge).  Returns the edges."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(vertices).astype(np.int64)
    per = vertices // epochs
    schema = pa.schema([("src", pa.int64()), ("dst", pa.int64())])
    writer = ParquetEventWriter(path, flush_seconds=0.0, schema=schema)
    total = 0
    for e in range(epochs):
        fresh = order[e * per:(e + 1) * per]
        src, dst = fresh[0::2], fresh[1::2][:len(fresh[0::2])]
        if e:
            links = rng.integers(0, e * per, size=len(src) // 10)
            src = np.concatenate([src, fresh[:len(links)]])
            dst = np.concatenate([dst, order[links]])
        batch = pa.record_batch([pa.array(src), pa.array(dst)], schema=schema)
        writer.push(Messages(e, [batch]))
        writer.push(Progress([(e, -1), (e + 1, 1)]))
        total += batch.num_rows
    writer.push(Progress([(epochs, -1)]))
    writer.close()
    return total


def component_snapshots(workdir: Path, vertices: int, epochs: int, every: float, timeout: float) -> dict:
    edges = workdir / "edges"
    count = edges_log(edges, vertices, epochs)
    out: dict = {"edges": count}
    for label, ckpt in (("no checkpoint", None), ("snapshots", workdir / "checkpoint")):
        changes = workdir / f"changes-{'ckpt' if ckpt else 'plain'}"
        watcher = CheckpointWatcher(ckpt) if ckpt else None
        if watcher:
            watcher.start()
        start = time.perf_counter()
        ts.execute(follow_components(str(edges), str(changes)), processes=2, timeout=timeout,
                   **({"checkpoint": str(ckpt), "snapshot_every": every} if ckpt else {}))
        out[label] = time.perf_counter() - start
        if watcher:
            watcher.stop.set()
            watcher.join()
            out["durations"] = watcher.durations()
            out["size"] = snapshot_bytes(ckpt)
    return out


def snapshot_bytes(ckpt: Path) -> tuple[int, int]:
    """(bytes, files) of the newest committed snapshot (from its manifest, else its directory)."""
    manifests = sorted(ckpt.glob("manifest-*.json"))
    if not manifests:
        return 0, 0
    newest = manifests[-1]
    folder = ckpt / newest.name.replace("manifest-", "snapshot-").replace(".json", "")
    files = [p for p in folder.rglob("*") if p.is_file()]
    if files:
        return sum(p.stat().st_size for p in files), len(files)
    meta = json.loads(newest.read_text())
    return sum(int(f.get("size", 0)) for f in meta.get("files", [])), len(meta.get("files", []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds of input per pipeline run")
    parser.add_argument("--rate", type=int, default=5000, help="records per second (more than it keeps up with)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between input files")
    parser.add_argument("--vertices", type=int, default=2_000_000, help="vertices of component state (part 2)")
    parser.add_argument("--epochs", type=int, default=8, help="epochs of the edges log (part 2)")
    parser.add_argument("--every", type=float, default=5.0, help="snapshot_every of part 2")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--skip-pipeline", action="store_true", help="part 2 only")
    args = parser.parse_args()

    load = os.getloadavg()
    workdir = Path(tempfile.mkdtemp(prefix="bench_snapshots-"))
    try:
        if not args.skip_pipeline:
            spark = ts.spark.get_session("bench snapshots", master=args.master)
            spark.sparkContext.setLogLevel("ERROR")
            try:
                pipeline_run(spark, workdir / "warm-up", argparse.Namespace(**{**vars(args), "seconds": 10.0}),
                             5.0)          # the session's first pipeline starts slower: not counted
                plain = pipeline_run(spark, workdir / "plain", args, 100 * args.seconds + 3600)
                snap = pipeline_run(spark, workdir / "snap", args, 5.0)
            finally:
                spark.stop()
            print(f"pipeline ({args.master}; {args.rate} records/s offered for {args.seconds:g} s): no snapshot "
                  f"{plain['throughput']:.0f} records/s to the last epoch downstream, {plain['wall']:.0f} over the "
                  f"whole run ({plain['records']} records, {plain['epochs']} epochs, result ok: {plain['ok']}); "
                  f"snapshot_every=5 {snap['throughput']:.0f} / {snap['wall']:.0f} records/s ({snap['records']} "
                  f"records, {snap['epochs']} epochs, result ok: {snap['ok']}); ratio "
                  f"{snap['throughput'] / plain['throughput']:.1%} to the last epoch, "
                  f"{snap['wall'] / plain['wall']:.1%} over the run (target >= 90%)")
        comp = component_snapshots(workdir / "components", args.vertices, args.epochs, args.every, args.timeout)
        durations = comp.get("durations", [])
        size, files = comp.get("size", (0, 0))
        shown = ", ".join(f"{d:.2f}" for d in durations)
        print(f"components, {args.vertices} vertices ({comp['edges']} edges in {args.epochs} epochs), "
              f"ts.execute(processes=2): no checkpoint {comp['no checkpoint']:.1f} s, snapshot_every={args.every:g} "
              f"{comp['snapshots']:.1f} s; {len(durations)} snapshots, files -> commit (s): [{shown}]; newest "
              f"committed snapshot {size / 2 ** 20:.1f} MiB in {files} files")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"load average at the start: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; at the end: "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
