"""Recovery bench: the time from a worker's death to the job producing output again, on local-cluster.

A stateful streaming job -- running sums over KEYS keys (numpy; kept with
``OperatorBuilder.keep_state``), one epoch of ROWS rows every EPOCH_SECONDS -- runs
with ``ts.spark.run(..., checkpoint=DIR, snapshot_every=S, max_attempts=2)`` on
``local-cluster[2,1,1024]`` (two executor JVMs).  On the first attempt, worker 1's
Python process kills itself (SIGKILL) at epoch KILL_AT.  The retry restores the last
committed snapshot (at time t) and replays epochs t..KILL_AT.  Printed, from the kill:

1. Spark noticing: the kill -> the driver learns the barrier job failed;
2. new stage: -> the retry's worker function starts (Spark schedules the stage, the
   tasks meet and connect their mesh, the state layer reads the manifest);
3. restore: -> the dataflow is built (every ``keep_state`` got its state back);
4. first output: -> the first epoch after the restore (t) is complete;
   total = 1..4, the time to output again (target <= 15 s);
5. replay: -> epoch KILL_AT is complete again (the work lost since the snapshot).

    python jobs/benchmarks/bench_recovery.py [--keys N] [--rows N] [--epochs N] [--kill-at N]
                                  [--snapshot-every S] [--epoch-seconds S] [--master URL]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from typing import Any

import timely_spark as ts


def running_sums(stream: Any, keys: int) -> Any:
    """Per key, the sum of every value so far; a time's changed keys with their sums
    leave as one record batch when the time completes.  State: a numpy array."""
    import numpy as np
    import pyarrow as pa

    b = ts.OperatorBuilder(stream.scope, "RunningSums")
    inp = b.new_input(stream, ts.Pipeline)            # exchanged by key before
    out, summed = b.new_output()
    sums = np.zeros(keys, np.int64)
    stash: dict = {}                                 # time -> [capability, record batches]

    def save(t: Any) -> Any:
        return {"sums": sums.copy(), "stash": {s: list(rbs) for s, (_, rbs) in stash.items() if s < t}}

    initial = b.initial_capability()
    restored = b.keep_state(save)
    if restored is not None:
        sums[:] = restored["sums"]
        for s, rbs in restored["stash"].items():
            stash[s] = [initial.delayed(s), list(rbs)]
    initial.drop()

    def logic() -> None:
        for cap, batch in inp:
            stash.setdefault(cap.time, [cap.retain(), []])[1].extend(batch)
        for s in sorted(t for t in stash if not inp.frontier.less_equal(t)):
            cap, rbs = stash.pop(s)
            if not rbs:
                continue
            k = np.concatenate([rb.column("key").to_numpy() for rb in rbs])
            np.add.at(sums, k, np.concatenate([rb.column("value").to_numpy() for rb in rbs]))
            changed = np.unique(k)
            out.session(cap).give(pa.record_batch({"key": changed, "sum": sums[changed]}))

    b.build(logic, notify=True)
    return summed


def job(args: argparse.Namespace, marker: str) -> Any:
    def work(worker: Any) -> dict:
        import numpy as np
        import pyarrow as pa

        started = time.time()
        marks: dict = {}

        def build(scope: Any) -> Any:
            inp, stream = scope.new_input()
            return inp, running_sums(stream.exchange_by("key"), args.keys).probe()

        inp, probe = worker.dataflow(build)
        built = time.time()
        first = worker.restored_time or 0
        for epoch in range(first, args.epochs):
            rng = np.random.default_rng([epoch, worker.index])
            n = args.rows // worker.peers
            inp.send(pa.record_batch({"key": rng.integers(0, args.keys, n), "value": rng.integers(0, 100, n)}))
            inp.advance_to(epoch + 1)
            due = time.monotonic() + args.epoch_seconds
            worker.step_while(lambda: probe.less_than(inp.time))
            marks.setdefault("first_output", time.time())
            if epoch == args.kill_at:
                marks["replayed"] = time.time()
                if worker.index == 1 and not os.path.exists(marker):
                    with open(marker, "w") as f:
                        f.write(repr(time.time()))
                    os.kill(os.getpid(), 9)
            worker.step_while(lambda: time.monotonic() < due)
        return {"restored": worker.restored_time, "started": started, "built": built, **marks}

    return work


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys of the running sums (default 1,000,000)")
    parser.add_argument("--rows", type=int, default=200_000, help="rows per epoch (default 200,000)")
    parser.add_argument("--epochs", type=int, default=40, help="epochs (default 40)")
    parser.add_argument("--kill-at", type=int, default=25, help="epoch at which worker 1 dies (default 25)")
    parser.add_argument("--snapshot-every", type=float, default=5.0, help="seconds between snapshots (default 5)")
    parser.add_argument("--epoch-seconds", type=float, default=0.5, help="seconds per epoch (default 0.5)")
    parser.add_argument("--master", default="local-cluster[2,1,1024]", help="Spark master (default local-cluster)")
    args = parser.parse_args(argv)
    if not 0 <= args.kill_at < args.epochs - 1:
        parser.error("--kill-at must be in 0..epochs-2")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    load = os.getloadavg()[0]
    work_dir = tempfile.mkdtemp(prefix="bench_recovery_")
    checkpoint, marker = os.path.join(work_dir, "checkpoint"), os.path.join(work_dir, "killed")
    try:
        spark = ts.spark.get_session("bench_recovery", master=args.master)
        stats: dict = {}
        results = ts.spark.run(spark, job(args, marker), workers=2, max_attempts=2, checkpoint=checkpoint,
                               snapshot_every=args.snapshot_every, stats=stats)
        spark.stop()
        with open(marker) as f:
            killed = float(f.read())
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    noticed = stats["failures"][0]["noticed"]
    started = min(r["started"] for r in results)
    built = max(r["built"] for r in results)
    first = max(r["first_output"] for r in results)
    replayed = max(r["replayed"] for r in results)
    t = results[0]["restored"]
    tasks = stats["tasks"]
    meet, mesh = max(s["gather_seconds"] for s in tasks), max(s["connect_seconds"] for s in tasks)
    print(f"{args.keys:,} keys, {args.rows:,} rows/epoch, an epoch every {args.epoch_seconds} s, snapshot every "
          f"{args.snapshot_every} s; killed at epoch {args.kill_at}, restored the snapshot at t={t} "
          f"(load average {load:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} cores)")
    print(f"  1. Spark noticing the failure  {noticed - killed:6.2f} s")
    print(f"  2. the new stage starting      {started - noticed:6.2f} s   (of which the tasks meeting "
          f"{meet:.2f} s, the mesh {mesh:.2f} s)")
    print(f"  3. restore (dataflow built)    {built - started:6.2f} s")
    print(f"  4. first epoch after restore   {first - built:6.2f} s")
    print(f"  death -> output again          {first - killed:6.2f} s   (target <= 15)")
    print(f"  5. replay to epoch {args.kill_at:<3}         {replayed - first:6.2f} s   "
          f"({args.kill_at - (t or 0)} epochs after the first)")


if __name__ == "__main__":
    main()
