"""Benchmark: the streaming pipeline of jobs/examples/streaming_components.py against a Spark-only stateful query.

(The pipeline's stages: ``timely_spark.graph.streaming``.)

One SparkSession (``local[2]`` by default).  First the three-stage pipeline runs for
``--seconds`` at a steady input rate (a file of ``rate * interval`` records every
``interval`` seconds; default triggers): records -> Structured Streaming ->
``format("timely")`` sink -> a timely job following the log (``ts.graph.components``)
-> a log of changes -> ``readStream.format("timely")`` -> foreachBatch.  Then the peer:
a Spark-only running ``groupBy("email").count()`` in update mode from the same kind of
source to the same kind of sink (foreachBatch), for as long.

Printed:

* delay from a sink micro-batch's commit (its epoch visible in the edges log) to its
  changes reaching the downstream readStream: median and p95 (targets: 1 s and 2 s);
* end-to-end delay from an input file landing to its result, for both (the overhead of
  the detour through timely);
* the timely worker's RSS over the run (first, max, last), and the number of files in
  the two logs with compaction on (the files readers use, and all on disk: replaced
  files stay ``COMPACT_GRACE`` seconds).

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

import timely_spark as ts
from timely_spark.capture import LogIndex
from timely_spark.graph import streaming as pipeline


def quantiles(values: list) -> tuple[float, float]:
    values = sorted(values)
    if not values:
        return float("nan"), float("nan")
    return statistics.median(values), values[min(len(values) - 1, int(round(0.95 * (len(values) - 1))))]


def spark_only(spark, workdir: Path, seconds: float, rate: int, interval: float, pool: int) -> dict:
    """The peer: a running groupBy("email").count() in update mode, foreachBatch sink."""
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
    delays = [seen[b] - generator.written[b] for b in seen if b < len(generator.written)]
    return {"delays": delays, "records": generator.next_id}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=120.0, help="seconds each of the two runs takes")
    parser.add_argument("--rate", type=int, default=200, help="records per second")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between input files")
    parser.add_argument("--pool", type=int, default=5000, help="distinct emails and phones")
    parser.add_argument("--compact-every", type=int, default=16, help="compaction: files per compaction (0: off)")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    spark = ts.spark.get_session("bench streaming", master=args.master)
    spark.sparkContext.setLogLevel("ERROR")
    workdir = Path(tempfile.mkdtemp(prefix="bench_streaming-"))
    try:
        start = time.perf_counter()
        result = pipeline.run_pipeline(spark, workdir / "timely", args.seconds, args.rate, args.interval, args.pool,
                                       printer=None, compact_every=args.compact_every, sample_every=5.0, watch=True)
        wall = time.perf_counter() - start
        seen, committed, written = result["seen"], result["committed"], result["written"]
        commit_delays = [seen[e] - committed[e] for e in seen if e in committed]
        e2e = [seen[e] - written[e] for e in seen if e < len(written)]
        live = {name: len(LogIndex(workdir / "timely" / name).snapshot().parts) for name in ("edges", "changes")}
        peer = spark_only(spark, workdir / "spark", args.seconds, args.rate, args.interval, args.pool)
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    med, p95 = quantiles(commit_delays)
    med_e2e, p95_e2e = quantiles(e2e)
    half = len(commit_delays) // 2
    early, late = quantiles(commit_delays[:half])[0], quantiles(commit_delays[half:])[0]
    peer_med, peer_p95 = quantiles(peer["delays"])
    timed = list((result["rss"] or [[]])[0]) if result["rss"] else []
    samples = [mb for _, mb in timed]
    print(f"input: {args.rate} records/s in a file every {args.interval:g} s for {args.seconds:g} s "
          f"({result['records']} records, {result['epochs']} epochs; pipeline wall {wall:.0f} s; {args.master})")
    print(f"timely pipeline, sink commit -> downstream readStream: median {med:.2f} s, p95 {p95:.2f} s "
          f"(targets 1 s, 2 s; n={len(commit_delays)}; first half median {early:.2f} s, second half {late:.2f} s)")
    print(f"timely pipeline, input file -> downstream readStream:  median {med_e2e:.2f} s, p95 {p95_e2e:.2f} s")
    print(f"Spark-only groupBy().count() update mode, input file -> foreachBatch: median {peer_med:.2f} s, "
          f"p95 {peer_p95:.2f} s (n={len(peer['delays'])}); timely/Spark median ratio "
          f"{med_e2e / peer_med if peer_med else float('nan'):.2f}")
    if samples:
        print(f"timely worker RSS: first {samples[0]:.0f} MiB, max {max(samples):.0f} MiB, last {samples[-1]:.0f} MiB "
              f"({len(samples)} samples)")
        minutes = [f"{mb:.0f}" for (at, mb), (before, _) in zip(timed[1:], timed[:-1])
                   if int(at // 60) > int(before // 60)]
        print(f"timely worker RSS each minute (MiB): {samples[0]:.0f} " + " ".join(minutes))
    print(f"log files (compact_every={args.compact_every}): edges {live['edges']} read / {result['files']['edges']} "
          f"on disk, changes {live['changes']} read / {result['files']['changes']} on disk; final result equals "
          f"the batch algorithm: {'yes' if result['ok'] else 'NO'}")


if __name__ == "__main__":
    main()
