"""Incremental connected components on Spark barrier workers that survive a SIGKILL.

A seeded random changelog of edges (every epoch adds edges and withdraws some added
three epochs before) goes through :func:`timely_spark.graph.components` on ``--workers``
barrier tasks (``ts.spark.run``); the changelog of the result is captured into a
Parquet event log (``<out>/labels``), exactly once across failures.  With
``--checkpoint DIR`` the workers snapshot their state every ``--snapshot-every``
seconds, and ``--max-attempts 2`` lets a failed run start again from the last
snapshot.  ``--kill-at EPOCH`` makes the last worker SIGKILL its own Python process at
that epoch of the first attempt, once a snapshot is committed (a file
``<out>/killed`` records it), so the second attempt restores.

At the end the driver reads the log with Spark, folds it into ``(vertex, component)``
at the last epoch, checks that against :func:`timely_spark.graph.union_find` of the
live edges, and prints one JSON line: the log's rows (time, vertex, component, diff),
the components, the attempts and the restored time.  Run without a kill and with one,
the log is the same row for row.

    spark-submit --master spark://HOST:7077 jobs/examples/components_recovery.py \\
        --out /shared/cc --checkpoint /shared/cc-ckpt --max-attempts 2 --kill-at 6
    python jobs/examples/components_recovery.py --out /tmp/cc --master 'local[2]'
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import time
from typing import Any, Optional

import numpy as np
import pyarrow as pa

import timely_spark as ts
from timely_spark.capture import ParquetEventWriter

LABELS = pa.schema([("vertex", pa.int64()), ("component", pa.int64()), ("diff", pa.int64())])
SNAPSHOT_AT = 3     # the epoch at which a first-attempt run waits for a committed snapshot (when it will kill)
WAIT = 60.0         # seconds to wait for an epoch to complete, or for that snapshot


def added(seed: int, epoch: int, vertices: int, per_epoch: int) -> tuple[np.ndarray, np.ndarray]:
    """The edges epoch ``epoch`` adds (the same on every machine)."""
    rng = np.random.default_rng([seed, epoch])
    return rng.integers(0, vertices, per_epoch), rng.integers(0, vertices, per_epoch)


def epoch_changes(seed: int, epoch: int, vertices: int, per_epoch: int) -> pa.RecordBatch:
    """Epoch ``epoch``'s changes: its added edges (+1) and half of those of three epochs before withdrawn (-1)."""
    src, dst = added(seed, epoch, vertices, per_epoch)
    diff = np.ones(len(src), np.int64)
    if epoch >= 3:
        old_src, old_dst = added(seed, epoch - 3, vertices, per_epoch)
        half = per_epoch // 2
        src, dst = np.concatenate([src, old_src[:half]]), np.concatenate([dst, old_dst[:half]])
        diff = np.concatenate([diff, -np.ones(half, np.int64)])
    return pa.record_batch({"src": src, "dst": dst, "diff": diff})


def live_edges(seed: int, epochs: int, vertices: int, per_epoch: int) -> pa.Table:
    """The edges (with positive counts) after the last epoch: the reference's input."""
    changes = pa.Table.from_batches([epoch_changes(seed, e, vertices, per_epoch) for e in range(epochs)])
    counts = changes.group_by(["src", "dst"]).aggregate([("diff", "sum")])
    return counts.filter(pa.compute.greater(counts["diff_sum"], 0)).select(["src", "dst"])


def job(out: str, epochs: int, vertices: int, per_epoch: int, seed: int, kill_at: Optional[int]) -> Any:
    """The worker function: feed the epochs (worker 0), capture the components' changelog."""
    marker = os.path.join(out, "killed")

    def work(worker: Any) -> Any:
        writer = ParquetEventWriter(os.path.join(out, "labels"), worker.index, worker.peers, flush_seconds=0.0,
                                    schema=LABELS)

        def build(scope: Any) -> Any:
            inp, edges = scope.new_input()
            labels = ts.graph.components(edges)
            labels.capture_into(writer)
            return inp, labels.probe()

        inp, probe = worker.dataflow(build)
        first = worker.restored_time or 0
        kill = kill_at is not None and not os.path.exists(marker)
        for epoch in range(first, epochs):
            if worker.index == 0:
                inp.send(epoch_changes(seed, epoch, vertices, per_epoch))
            inp.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(inp.time), timeout=WAIT)
            if kill and epoch == SNAPSHOT_AT:         # a snapshot to restore, then epochs it lacks
                committed = os.path.join(worker.config.checkpoint, "manifest-*.json")
                worker.step_while(lambda: not glob.glob(committed), timeout=WAIT)
            if kill and epoch == kill_at:
                until = time.monotonic() + 0.3      # let the others pass the epoch too
                worker.step_while(lambda: time.monotonic() < until)
                if worker.index == worker.peers - 1:
                    with open(marker, "w") as f:
                        f.write(f"worker {worker.index} killed at epoch {epoch}")
                    os.kill(os.getpid(), signal.SIGKILL)
        inp.close()
        worker.step_while(lambda: not probe.done(), timeout=WAIT)
        writer.close()
        return worker.restored_time

    return work


def parse(argv: Optional[list] = None) -> argparse.Namespace:
    """The job's arguments, from ``argv`` (the command line's when None)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="directory of the output log (<out>/labels)")
    parser.add_argument("--checkpoint", help="checkpoint directory (every executor and the driver reach it)")
    parser.add_argument("--snapshot-every", type=float, default=1.0, help="seconds between snapshots (default 1)")
    parser.add_argument("--max-attempts", type=int, default=1, help="attempts of the run (default 1)")
    parser.add_argument("--kill-at", type=int, help="SIGKILL the last worker's Python process at this epoch "
                        f"(first attempt, after epoch {SNAPSHOT_AT}'s snapshot; needs --checkpoint)")
    parser.add_argument("--epochs", type=int, default=10, help="epochs of changes (default 10)")
    parser.add_argument("--vertices", type=int, default=200, help="vertex ids 0..N-1 (default 200)")
    parser.add_argument("--per-epoch", type=int, default=60, help="edges added per epoch (default 60)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2, help="timely workers (barrier tasks)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds an attempt may take (default 300)")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[2])")
    args = parser.parse_args(argv)
    if args.kill_at is not None and (args.checkpoint is None or not SNAPSHOT_AT < args.kill_at < args.epochs):
        parser.error(f"--kill-at needs --checkpoint and an epoch after {SNAPSHOT_AT} and before --epochs")
    return args


def run(spark: Any, args: argparse.Namespace) -> dict:
    """The job on ``spark``'s session: its report (what :func:`main` prints as JSON)."""
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    stats: dict = {}
    restored = ts.spark.run(spark, job(out, args.epochs, args.vertices, args.per_epoch, args.seed, args.kill_at),
                            workers=args.workers, max_attempts=args.max_attempts, timeout=args.timeout,
                            checkpoint=args.checkpoint, snapshot_every=args.snapshot_every if args.checkpoint else None,
                            stats=stats)
    log = ts.spark.read_event_log(spark, os.path.join(out, "labels"))
    rows = sorted(tuple(r) for r in log.select("time", "vertex", "component", "diff").collect())
    folded: dict = {}
    for _, vertex, component, diff in rows:
        folded[(vertex, component)] = folded.get((vertex, component), 0) + diff
    assert all(n in (0, 1) for n in folded.values()), "a (vertex, component) row counted twice or withdrawn twice"
    labels = dict(sorted(key for key, n in folded.items() if n == 1))
    live = live_edges(args.seed, args.epochs, args.vertices, args.per_epoch)
    want = ts.graph.connected_components(live).to_pydict()
    assert labels == dict(zip(want["vertex"], want["component"])), "the components differ from the reference's"
    return {"rows": rows, "components": len(set(labels.values())), "vertices": len(labels),
            "attempts": stats["attempts"], "restored": restored, "killed": os.path.exists(os.path.join(out, "killed"))}


def main(argv: Optional[list] = None) -> None:
    args = parse(argv)
    spark = ts.spark.get_session("timely components recovery", master=args.master)
    try:
        report = run(spark, args)
    finally:
        spark.stop()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
