"""Benchmark: the streaming pipeline of jobs/examples/streaming_components.py against a Spark-only stateful query.

(The pipeline's stages: ``timely_spark.graph.streaming``.)

One SparkSession (``local[2]`` by default).  First the three-stage pipeline runs for
``--seconds`` at a steady input rate (``--rate``, default 1,000 records/s: a file of
``rate * interval`` records every ``interval`` seconds; default triggers): records -> Structured Streaming ->
``format("timely")`` sink -> a timely job following the log (``ts.graph.components``)
-> a log of changes -> ``readStream.format("timely")`` -> foreachBatch.  Then the peer:
a Spark-only running ``groupBy("email").count()`` in update mode from the same kind of
source to the same kind of sink (foreachBatch), for as long.

Then both again, shorter (``--sweep-seconds``), at each higher rate of ``--sweep``.

Printed:

* input file landing -> its result rows reaching the downstream query, median and p95,
  for both, once started (:func:`steady`) (targets for timely at 1,000 records/s: 1 s and 2 s), and whether the delay
  grew over the run (:func:`lag_grows`); the same from the sink's commit for timely;
* per rate tried, both sides' delays, and the highest rate each side sustained;
* the timely worker's RSS over the main run (first, max, last) and its slope after the
  first minute (MiB a minute, and as a share of its level);
* the number of files in the two logs with compaction on (the files readers use, and
  all on disk: replaced files stay ``COMPACT_GRACE`` seconds).

    python jobs/benchmarks/bench_streaming.py --seconds 120
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

import timely_spark as ts
from timely_spark.capture import LogIndex
from timely_spark.graph import streaming as pipeline


def quantiles(values: list) -> tuple[float, float]:
    values = sorted(values)
    if not values:
        return float("nan"), float("nan")
    return statistics.median(values), values[min(len(values) - 1, int(round(0.95 * (len(values) - 1))))]


def steady(seen: dict, written: list) -> list:
    """Input file -> output delay of each epoch, in order, from the first file that landed
    after the first output (the files before queued while the queries and the timely job
    started: start-up, not steady state); every epoch if fewer than 3 files came after."""
    every = [(seen[e] - written[e], written[e]) for e in sorted(seen) if e < len(written)]
    if not every:
        return []
    first = min(seen.values())
    kept = [d for d, at in every if at >= first]
    return kept if len(kept) >= 3 else [d for d, _ in every]       # never caught up: every epoch counts


def spark_only(spark, workdir: Path, seconds: float, rate: int, interval: float, pool: int) -> dict:
    """The peer: a running groupBy("email").count() in update mode, foreachBatch sink, on
    the same generator's files (same seed: the same records)."""
    source = workdir / "input"
    source.mkdir(parents=True)
    generator = pipeline.Generator(source, rate, interval, pool)
    generator.write_file()
    seen: dict[int, float] = {}
    lock = threading.Lock()

    def sink(frame, batch_id):
        frame.count()                        # the result is computed and handed over
        with lock:
            seen.setdefault(batch_id, time.time())

    query = (spark.readStream.schema("id long, email string, phone string").option("maxFilesPerTrigger", 1)
             .json(str(source)).groupBy("email").count()
             .writeStream.outputMode("update").option("checkpointLocation", str(workdir / "ckpt"))
             .foreachBatch(sink).start())
    generator.start()
    time.sleep(seconds)
    generator.stop_event.set()
    generator.join()
    query.processAllAvailable()
    query.stop()
    return {"delays": steady(seen, generator.written), "records": generator.next_id}


def timely(spark, workdir: Path, seconds: float, rate: int, interval: float, pool: int, compact_every: int,
           sample_every: float) -> dict:
    """The timely pipeline for ``seconds``: the input file -> output row delay of each
    epoch (in epoch order), the sink-commit -> output delays, the worker's RSS samples
    and the final check.  The one place that assembles the route (sink, followed
    ``ts.spark.run``, ``readStream``): replace it to measure another assembly."""
    result = pipeline.run_pipeline(spark, workdir, seconds, rate, interval, pool, printer=None,
                                   compact_every=compact_every, sample_every=sample_every, watch=True)
    seen, committed, written = result["seen"], result["committed"], result["written"]
    if not seen:
        print(f"at {rate} records/s the downstream readStream received nothing: it failed (its error is on stderr; "
              "under heavy load, a Python worker that cannot connect back to Spark in time)")
    files = {name: (len(LogIndex(workdir / name).snapshot().parts), result["files"][name])
             for name in ("edges", "changes")}
    return {"delays": steady(seen, written),
            "commit_delays": [seen[e] - committed[e] for e in sorted(seen) if e in committed],
            "rss": list((result["rss"] or [[]])[0]) if result["rss"] else [], "records": result["records"],
            "epochs": result["epochs"], "ok": result["ok"], "files": files}


def lag_grows(delays: list) -> bool:
    """Whether the input -> output delay grew over the run: the median of its last third
    over that of its first third by more than a second and by half (a pipeline that keeps
    up has a flat delay; one that falls behind queues a file more each interval)."""
    if len(delays) < 6:
        return True
    third = len(delays) // 3
    early, late = statistics.median(delays[:third]), statistics.median(delays[-third:])
    return late > early + 1.0 and late > 1.5 * early


def slope(samples: list, after: float = 60.0) -> tuple[float, float]:
    """The least-squares slope of ``[(seconds, MiB)]`` after ``after`` seconds, MiB per
    minute, and as a share of the mean over that span (nan with fewer than 3 samples)."""
    kept = [(t, mb) for t, mb in samples if t >= after]
    if len(kept) < 3:
        return float("nan"), float("nan")
    t = np.array([k[0] for k in kept]) / 60.0
    mb = np.array([k[1] for k in kept])
    per_minute = float(np.polyfit(t, mb, 1)[0])
    return per_minute, per_minute / float(mb.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=120.0, help="seconds each of the two runs takes")
    parser.add_argument("--rate", type=int, default=1000, help="records per second")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between input files")
    parser.add_argument("--pool", type=int, default=5000, help="distinct emails and phones")
    parser.add_argument("--compact-every", type=int, default=16, help="compaction: files per compaction (0: off)")
    parser.add_argument("--sweep", default="2000,4000,8000",
                        help="higher rates to try, comma-separated, each for --sweep-seconds (empty: none); the "
                             "highest sustained rate is the highest whose delay does not grow")
    parser.add_argument("--sweep-seconds", type=float, default=45.0)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    spark = ts.spark.get_session("bench streaming", master=args.master)
    spark.sparkContext.setLogLevel("ERROR")
    workdir = Path(tempfile.mkdtemp(prefix="bench_streaming-"))
    sweep: dict[int, dict] = {}
    try:
        start = time.perf_counter()
        main_run = timely(spark, workdir / "timely", args.seconds, args.rate, args.interval, args.pool,
                          args.compact_every, 5.0)
        wall = time.perf_counter() - start
        peer = spark_only(spark, workdir / "spark", args.seconds, args.rate, args.interval, args.pool)
        for rate in [int(r) for r in args.sweep.split(",") if r.strip()]:
            sweep[rate] = {"timely": timely(spark, workdir / f"timely-{rate}", args.sweep_seconds, rate,
                                            args.interval, args.pool, args.compact_every, 0.0),
                           "spark": spark_only(spark, workdir / f"spark-{rate}", args.sweep_seconds, rate,
                                               args.interval, args.pool)}
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    med, p95 = quantiles(main_run["commit_delays"])
    med_e2e, p95_e2e = quantiles(main_run["delays"])
    peer_med, peer_p95 = quantiles(peer["delays"])
    timed = main_run["rss"]
    samples = [mb for _, mb in timed]
    print(f"input: {args.rate} records/s in a file every {args.interval:g} s for {args.seconds:g} s "
          f"({main_run['records']} records, {main_run['epochs']} epochs; pipeline wall {wall:.0f} s; {args.master})")
    print(f"timely pipeline, input file -> output row (readStream):  median {med_e2e:.2f} s, p95 {p95_e2e:.2f} s "
          f"(targets 1 s, 2 s; n={len(main_run['delays'])}; delay grows: "
          f"{'yes' if lag_grows(main_run['delays']) else 'no'})")
    print(f"timely pipeline, sink commit -> output row:            median {med:.2f} s, p95 {p95:.2f} s")
    print(f"Spark-only groupBy().count() update mode, input file -> foreachBatch: median {peer_med:.2f} s, "
          f"p95 {peer_p95:.2f} s (n={len(peer['delays'])}; delay grows: {'yes' if lag_grows(peer['delays']) else 'no'})"
          f"; timely/Spark median ratio {med_e2e / peer_med if peer_med else float('nan'):.2f}")
    rates = {args.rate: {"timely": main_run, "spark": peer}, **sweep}
    for rate, runs in sorted(rates.items()):
        shown = []
        for side in ("timely", "spark"):
            m, p = quantiles(runs[side]["delays"])
            shown.append(f"{side} median {m:.2f} s p95 {p:.2f} s "
                         f"({'falls behind' if lag_grows(runs[side]['delays']) else 'keeps up'})")
        print(f"  {rate:>6} records/s: " + "; ".join(shown))
    for side in ("timely", "spark"):
        kept = [r for r, runs in rates.items() if not lag_grows(runs[side]["delays"])]
        print(f"highest sustained rate tried, {side}: " + (f"{max(kept)} records/s" if kept else "none of those tried"))
    if samples:
        per_minute, share = slope(timed)
        print(f"timely worker RSS: first {samples[0]:.0f} MiB, max {max(samples):.0f} MiB, last {samples[-1]:.0f} MiB "
              f"({len(samples)} samples); after the first minute {per_minute:+.1f} MiB/min ({100 * share:+.1f}% of "
              "its level a minute)")
    files = main_run["files"]
    ok = all(runs["timely"]["ok"] for runs in rates.values())
    print(f"log files (compact_every={args.compact_every}): edges {files['edges'][0]} read / {files['edges'][1]} "
          f"on disk, changes {files['changes'][0]} read / {files['changes'][1]} on disk; every run's final result "
          f"equals the batch algorithm: {'yes' if ok else 'NO'}")


if __name__ == "__main__":
    main()
