"""Benchmark: ``ts.spark.stream`` (identity resolution, jobs/examples/streaming_components.py) against a
Spark-only stateful query, on the same input, in the same run.

One SparkSession (``local[2]`` by default: one timely worker, one slot for the queries).
A generator writes a file of ``rate * interval`` customer records every ``interval``
seconds (the example's records: most new, a few joining or merging entities); each file
also withdraws the records of the file ``--window`` files before it (a ``diff`` of -1),
so after the first ``--window`` files the entities held stop growing, and the worker's
memory should too.  First the timely pipeline runs for ``--minutes`` (or ``--seconds``)
at ``--rate`` (default 1,000 records/s): records -> ``ts.spark.stream`` (the timely
sink, a barrier job following its log with ``ts.graph.components``, the output log) ->
``pipeline.df`` -> foreachBatch.  Then the peer, as long on the same records: a running
``groupBy("email").count()`` in update mode from the same file source to the same kind
of sink.  Both file sources take every file that landed since their last micro-batch in
the next one (a side that fell behind catches up); a file's delay is to the output of
the micro-batch that read it.  Then both again, ``--sweep-seconds`` each, at every rate
of ``--sweep``.

Printed:

* input file landing -> its output rows reaching foreachBatch, median and p95, for both
  (targets for timely at 1,000 records/s: 1 s and 2 s), from the first file that landed
  after the first output (start-up is not steady state), and whether the delay grew
  over the run (:func:`lag_grows`);
* where timely's delay goes, stage by stage (median and p95 of each): the file landing ->
  the input query's micro-batch starting (Spark's file source) -> its commit to the input
  log -> the worker having the epoch (its follower polling the log) -> the worker's
  output for it -> its commit to the output log -> foreachBatch of the output query (its
  trigger), and the two queries' ``durationMs`` parts;
* per rate tried, both sides' delays, and the highest rate each side sustained;
* the timely worker's RSS (``VmRSS`` of its Python process, sampled every 5 s) in each
  minute, highest and lowest, and after the first minute the spread of the minutes'
  highest (max - min, as a share of their mean; target within 10% over 10 minutes) and
  their slope.

    python jobs/benchmarks/bench_streaming.py --minutes 10
    python jobs/benchmarks/bench_streaming.py --seconds 60 --sweep 2000,4000 --sweep-seconds 30
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

import timely_spark as ts
from timely_spark.capture import LogIndex
from timely_spark.errors import EventLogError
from timely_spark.spark.pipeline import PIPELINE_POLL, PIPELINE_SNAPSHOT_EVERY

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import streaming_components as example  # noqa: E402 -- the example's records and edges

#: The example's first attribute vertex id (a constant here, so the dataflow travels by value).
ATTRIBUTES = example.ATTRIBUTES
RECORDS = "id long, email string, phone string, diff long"
OUTPUT = "vertex long, component long, diff long"
#: The stages of an epoch's way through the pipeline, in order (the events between them).
STAGES = [("landed", "batch"), ("batch", "committed"), ("committed", "followed"), ("followed", "computed"),
          ("computed", "logged"), ("logged", "seen")]
STAGE_NAMES = {"landed": "file lands", "batch": "input micro-batch starts", "committed": "input log commit",
               "followed": "worker has the epoch (follow poll)", "computed": "worker's output",
               "logged": "output log commit", "seen": "output query's foreachBatch"}


class TimedGenerator(example.Generator):
    """The example's generator, its records with a ``diff``: each file also withdraws the
    records of the file ``window`` files before it (0: none), so the entities held stay
    about ``window`` files' worth; notes when each file landed and its rows."""

    def __init__(self, folder: Path, rate: int, interval: float, window: int) -> None:
        super().__init__(folder, rate, interval, repeat=0.04, merge=0.01)
        self.window, self.held = window, []
        self.written: list[float] = []
        self.sizes: list[int] = []

    def rows(self, n: int) -> list[dict]:
        new = [dict(r, diff=1) for r in super().rows(n)]
        self.held.append(new)
        old = self.held.pop(0) if self.window and len(self.held) > self.window else []
        self.sizes.append(len(new) + len(old))
        return new + [dict(r, diff=-1) for r in old]

    def write_file(self) -> None:
        super().write_file()
        self.written.append(time.time())


def quantiles(values: list) -> tuple[float, float]:
    values = sorted(values)
    if not values:
        return float("nan"), float("nan")
    return statistics.median(values), values[min(len(values) - 1, int(round(0.95 * (len(values) - 1))))]


def batches_of_files(progress: dict, sizes: list) -> dict:
    """``{file: micro-batch}``: which micro-batch read each input file (the source takes
    the files in order, every new one in the next micro-batch; ``sizes``: their rows),
    from the micro-batches' ``numInputRows``."""
    ends, out, done, k = np.cumsum(sizes), {}, 0, 0
    for b in sorted(progress):
        done += progress[b].get("numInputRows", 0)
        while k < len(ends) and ends[k] <= done:
            out[k] = b
            k += 1
    return out


def steady(seen: dict, written: list, batch_of: dict) -> list:
    """Input file -> output delay of each file, in order, from the first file that landed
    after the first output (the files before queued while the queries and the timely job
    started); every file if fewer than 3 came after."""
    every = [(seen[batch_of[k]] - at, at) for k, at in enumerate(written) if batch_of.get(k) in seen]
    if not every:
        return []
    first = min(seen.values())
    kept = [d for d, at in every if at >= first]
    return kept if len(kept) >= 3 else [d for d, _ in every]


def lag_grows(delays: list) -> bool:
    """Whether the input -> output delay grew over the run: the median of its last third
    over that of its first third by more than a second and by half (a pipeline that keeps
    up has a flat delay; one that falls behind queues a file more each interval)."""
    if len(delays) < 6:
        return True
    third = len(delays) // 3
    early, late = statistics.median(delays[:third]), statistics.median(delays[-third:])
    return late > early + 1.0 and late > 1.5 * early


def rss_mb(pid: int) -> float:
    """The resident memory of process ``pid`` in MiB (``VmRSS``; nan once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def records(spark, folder: Path):
    return spark.readStream.schema(RECORDS).json(str(folder))


class Seen:
    """foreachBatch sink: when the rows of each epoch (``time``; an epoch is complete in
    the first output micro-batch that has it or a later one) or each micro-batch arrived."""

    def __init__(self, by_time: bool) -> None:
        self.by_time, self.at, self.lock = by_time, {}, threading.Lock()

    def __call__(self, frame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        if self.by_time:
            lo, hi = frame.agg(F.min("time"), F.max("time")).first()
            keys = range(lo, hi + 1) if lo is not None else []
        else:
            frame.count()                        # the result is computed and handed over
            keys = [batch_id]
        now = time.time()
        with self.lock:
            for k in keys:
                self.at.setdefault(k, now)


def progress_of(query, into: dict) -> None:
    """A query's micro-batches' progress, ``{batchId: progress}`` (its recent progress
    holds the last hundred: called every few seconds)."""
    for p in query.recentProgress:
        into.setdefault(p["batchId"], p)


def started_at(progress: dict) -> float:
    """When a micro-batch's trigger started (seconds since the epoch)."""
    start = datetime.datetime.strptime(progress["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return start.replace(tzinfo=datetime.timezone.utc).timestamp()


class LogWatch(threading.Thread):
    """When each epoch became complete in an event log (its frontier, looked at every
    20 ms until :meth:`stop`, as a follower does)."""

    def __init__(self, log: Path) -> None:
        super().__init__(daemon=True)
        self.log, self.at, self.done = log, {}, threading.Event()

    def run(self) -> None:
        index, last = None, 0
        while not self.done.wait(0.02):
            try:
                index = index or LogIndex(str(self.log))
                frontier = index.snapshot().frontier.elements()
            except (OSError, EventLogError):
                continue                        # not started yet
            now, upto = time.time(), (min(frontier) if frontier else max(self.at, default=-1) + 1)
            for e in range(last, upto):
                self.at[e] = now
            last = max(last, upto)

    def stop(self) -> None:
        self.done.set()
        self.join()


def durations(progress: dict, first: int) -> str:
    """The median of each ``durationMs`` part over the micro-batches from ``first`` on."""
    kept = [p["durationMs"] for b, p in progress.items() if b >= first]
    keys = sorted({k for d in kept for k in d}, key=lambda k: -statistics.median(d.get(k, 0) for d in kept))
    return ", ".join(f"{k} {statistics.median(d.get(k, 0) for d in kept):.0f}" for k in keys) if kept else "-"


def worker_events(path: Path) -> dict:
    """``{(event, epoch): seconds}`` the worker noted (the first of each)."""
    out: dict = {}
    if path.exists():
        for line in path.read_text().splitlines():
            kind, epoch, at = line.split()
            out.setdefault((kind, int(epoch)), float(at))
    return out


def dataflow(notes: str):
    """The example's dataflow (components of the edges, records' rows only), noting in the
    file ``notes`` the worker's pid and when each epoch reaches the worker and leaves it."""
    def note(kind: str):
        def at(t, batches):
            with open(notes, "a") as f:
                f.write(f"{kind} {t} {time.time()}\n")
        return at

    def build(scope, stream):
        with open(notes, "a") as f:
            f.write(f"pid 0 {os.getpid()}\n")
        labels = ts.graph.components(stream.inspect_batch(note("followed")), src="src", dst="dst")
        return labels.filter(pc.field("vertex") < ATTRIBUTES).inspect_batch(note("computed"))

    return build


def timely(spark, workdir: Path, seconds: float, rate: int, interval: float, window: int, sample_every: float,
           poll: float, snapshot_every: float = PIPELINE_SNAPSHOT_EVERY) -> dict:
    """``ts.spark.stream`` for ``seconds``: per epoch, when it passed each stage; the worker's
    RSS samples ``[(seconds, MiB)]`` every ``sample_every`` seconds (0: none); the final
    check against the batch algorithm."""
    source, notes = workdir / "input", workdir / "worker-notes.txt"
    source.mkdir(parents=True)
    generator = TimedGenerator(source, rate, interval, window)
    generator.write_file()
    seen, samples, inputs, outputs = Seen(by_time=True), [], {}, {}
    watches = [LogWatch(workdir / "pipeline" / log) for log in ("input", "output")]
    with ts.spark.stream(example.edges(records(spark, source)), dataflow(str(notes)), OUTPUT,
                         checkpoint=str(workdir / "pipeline"), poll=poll, snapshot_every=snapshot_every) as pipe:
        def output():
            return pipe.start_output(pipe.df.writeStream.foreachBatch(seen)
                                     .option("checkpointLocation", str(workdir / "output-query")))

        out, restarts = output(), 0
        generator.start()
        for watch in watches:
            watch.start()
        start = time.monotonic()
        pid, next_sample, next_progress = None, start, start
        while time.monotonic() - start < seconds:
            if not out.isActive and restarts < 3 and "failed to connect back" in str(out.exception()):
                out, restarts = output(), restarts + 1     # Spark's fixed 10 s wait at its start: again
                print(f"at {rate} records/s the output query failed at its start (Python worker failed to "
                      "connect back): started again on its checkpoint")
            if pipe.exception() is not None or not out.isActive:
                break
            now = time.monotonic()
            if now >= next_progress:
                progress_of(pipe.input_query, inputs)
                progress_of(out, outputs)
                next_progress += 10.0
            pid = pid or worker_events(notes).get(("pid", 0))
            if pid and sample_every and now >= next_sample:
                samples.append((now - start, rss_mb(int(pid))))
                next_sample += sample_every
            time.sleep(0.2)
        generator.stop_event.set()
        generator.join()
        pid = pid or worker_events(notes).get(("pid", 0))
        if pid and sample_every:                        # and one at the end of the run
            samples.append((time.monotonic() - start, rss_mb(int(pid))))
        error = pipe.exception() or (out.exception() if not out.isActive else None)
        if error is None:
            pipe.input_query.processAllAvailable()
            pipe.await_epoch(pipe.last_progress["epoch_in"], timeout=600)
            out.processAllAvailable()
        progress_of(pipe.input_query, inputs)
        progress_of(out, outputs)
    for watch in watches:
        watch.stop()
    if error is not None:
        print(f"at {rate} records/s the pipeline failed: {error}")
    root = workdir / "pipeline"
    events = worker_events(notes)
    stages = {"landed": dict(enumerate(generator.written)),
              "batch": {b: started_at(p) for b, p in inputs.items()},
              "committed": dict(watches[0].at),
              "followed": {e: at for (k, e), at in events.items() if k == "followed"},
              "computed": {e: at for (k, e), at in events.items() if k == "computed"},
              "logged": dict(watches[1].at),
              "seen": dict(seen.at)}
    ok = error is None and check(spark, root)
    batch_of = batches_of_files(inputs, generator.sizes)
    return {"delays": steady(seen.at, generator.written, batch_of), "stages": stages, "rss": samples,
            "batch_of": batch_of,
            "queries": (inputs, outputs),
            "records": generator.next_id, "epochs": len(generator.written), "ok": ok}


def check(spark, root: Path) -> bool:
    """The output log folded to its end equals the batch algorithm on the edges the input
    log holds at its end (each edge's diffs summed: withdrawn records' edges gone)."""
    edges = ts.spark.read_event_log(spark, str(root / "input")).toArrow()
    diff = next(c for c in edges.column_names if c.endswith("diff"))     # the input log's name for it
    held = edges.group_by(["src", "dst"]).aggregate([(diff, "sum")])
    held = held.filter(pc.greater(held[f"{diff}_sum"], 0))
    vertices, components = ts.graph.forest(held["src"].to_numpy(), held["dst"].to_numpy())
    expected = {v: c for v, c in zip(vertices.tolist(), components.tolist()) if v < ATTRIBUTES}
    final = ts.collection(ts.spark.read_event_log(spark, str(root / "output")).toArrow().drop_columns(["worker"]))
    return expected == dict(zip(final["vertex"].to_pylist(), final["component"].to_pylist()))


def spark_only(spark, workdir: Path, seconds: float, rate: int, interval: float, window: int) -> dict:
    """The peer: a running groupBy("email").count() in update mode, foreachBatch sink, on
    the same generator's files (same seed: the same records)."""
    source = workdir / "input"
    source.mkdir(parents=True)
    generator = TimedGenerator(source, rate, interval, window)
    generator.write_file()
    seen = Seen(by_time=False)
    query = (records(spark, source).groupBy("email").count()
             .writeStream.outputMode("update").option("checkpointLocation", str(workdir / "ckpt"))
             .foreachBatch(seen).start())
    generator.start()
    progress: dict = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and query.isActive:
        progress_of(query, progress)
        time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
    generator.stop_event.set()
    generator.join()
    query.processAllAvailable()
    progress_of(query, progress)
    query.stop()
    batch_of = batches_of_files(progress, generator.sizes)
    return {"delays": steady(seen.at, generator.written, batch_of), "records": generator.next_id}


def stage_lines(stages: dict, batch_of: dict) -> list[str]:
    """Median and p95 of each stage over the files whose epoch passed all of them, from
    the first file that landed after the first output (as :func:`steady`)."""
    first = min(stages["seen"].values(), default=0.0)
    stages = dict(stages)
    landed = stages.pop("landed")
    files = [k for k, at in landed.items() if at >= first and k in batch_of
             and all(batch_of[k] in v for v in stages.values())]
    at = {"landed": {k: landed[k] for k in files}}
    at.update({name: {k: v[batch_of[k]] for k in files} for name, v in stages.items()})
    lines = []
    for a, b in STAGES:
        m, p = quantiles([at[b][k] - at[a][k] for k in files])
        lines.append(f"  {STAGE_NAMES[a]:>36} -> {STAGE_NAMES[b]:<36} median {m:6.3f} s  p95 {p:6.3f} s")
    m, p = quantiles([at["seen"][k] - at["landed"][k] for k in files])
    lines.append(f"  {'all of it':>36}    {'':<36} median {m:6.3f} s  p95 {p:6.3f} s  (n={len(files)} files)")
    return lines


def rss_lines(samples: list) -> list[str]:
    """The worker's RSS in each minute (highest and lowest sample: the allocators hand
    memory back in swings), and from the second minute to the last whole one the spread of
    the minutes' highest (max - min, as a share of their mean) and their slope."""
    if not samples:
        return ["timely worker RSS: no sample (its pid was not seen)"]
    minutes: dict[int, list] = {}
    for t, mb in samples:
        minutes.setdefault(int(t // 60), []).append(mb)
    shown = ", ".join(f"{max(v):.0f} ({min(v):.0f})" for _, v in sorted(minutes.items()))
    line = f"timely worker RSS (MiB) in each minute, highest (lowest): {shown} ({len(samples)} samples)"
    whole = int(samples[-1][0] // 60)                  # the last minute, if begun, is not a whole one
    highs = [max(v) for m, v in sorted(minutes.items()) if 1 <= m < whole]
    if len(highs) < 2:
        return [line, "  (spread and slope need a run of over two minutes: --minutes 10)"]
    spread = max(highs) - min(highs)
    slope = float(np.polyfit(np.arange(len(highs)), np.array(highs), 1)[0])
    return [line, f"  after the first minute, the minutes' highest: spread {spread:.1f} MiB = "
                  f"{100 * spread / float(np.mean(highs)):.1f}% of their mean (target within 10%), slope "
                  f"{slope:+.2f} MiB/min"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, help="minutes of the main runs (overrides --seconds)")
    parser.add_argument("--seconds", type=float, default=120.0, help="seconds of each main run (default 120)")
    parser.add_argument("--rate", type=int, default=1000, help="records per second (default 1000)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between input files")
    parser.add_argument("--window", type=int, default=60,
                        help="files a record lives: each file also withdraws the records of the file this many "
                             "before it, so the entities held stop growing (0: records stay; default 60)")
    parser.add_argument("--poll", type=float, default=PIPELINE_POLL,
                        help="seconds between the workers' looks at the input log (ts.spark.stream's poll=)")
    parser.add_argument("--sweep", default="2000,4000,8000",
                        help="higher rates to try, comma-separated, each for --sweep-seconds (empty: none); the "
                             "highest sustained rate is the highest whose delay does not grow")
    parser.add_argument("--sweep-seconds", type=float, default=45.0)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    seconds = 60.0 * args.minutes if args.minutes else args.seconds

    load = os.getloadavg()
    spark = ts.spark.get_session("bench streaming", master=args.master)
    spark.sparkContext.setLogLevel("ERROR")
    workdir = Path(tempfile.mkdtemp(prefix="bench_streaming-"))
    runs: dict[int, dict] = {}
    try:
        main_run = timely(spark, workdir / "timely", seconds, args.rate, args.interval, args.window, 5.0, args.poll)
        runs[args.rate] = {"timely": main_run,
                           "spark": spark_only(spark, workdir / "spark", seconds, args.rate, args.interval,
                                               args.window)}
        for rate in [int(r) for r in args.sweep.split(",") if r.strip()]:
            runs[rate] = {"timely": timely(spark, workdir / f"timely-{rate}", args.sweep_seconds, rate,
                                           args.interval, args.window, 0.0, args.poll),
                          "spark": spark_only(spark, workdir / f"spark-{rate}", args.sweep_seconds, rate,
                                              args.interval, args.window)}
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    med, p95 = quantiles(main_run["delays"])
    peer = runs[args.rate]["spark"]
    peer_med, peer_p95 = quantiles(peer["delays"])
    print(f"input: {args.rate} records/s in a file every {args.interval:g} s for {seconds:g} s "
          f"({main_run['records']} records, {main_run['epochs']} epochs, each record withdrawn {args.window} files "
          f"later; {args.master}; poll {args.poll:g} s; "
          f"load average at the start {load[0]:.1f}, at the end {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores)")
    print(f"timely ts.spark.stream, input file -> output row (foreachBatch): median {med:.2f} s, p95 {p95:.2f} s "
          f"(targets 1 s, 2 s; n={len(main_run['delays'])}; delay grows: "
          f"{'yes' if lag_grows(main_run['delays']) else 'no'})")
    print(f"Spark-only groupBy().count() update mode, input file -> foreachBatch: median {peer_med:.2f} s, "
          f"p95 {peer_p95:.2f} s (n={len(peer['delays'])}; delay grows: {'yes' if lag_grows(peer['delays']) else 'no'})"
          f"; timely/Spark median ratio {med / peer_med if peer_med else float('nan'):.2f}")
    print("where timely's delay goes, stage by stage:")
    for line in stage_lines(main_run["stages"], main_run["batch_of"]):
        print(line)
    inputs, outputs = main_run["queries"]
    print(f"  input query's micro-batches, median ms: {durations(inputs, 5)}")
    print(f"  output query's micro-batches, median ms: {durations(outputs, 5)}")
    for rate, sides in sorted(runs.items()):
        shown = []
        for side in ("timely", "spark"):
            m, p = quantiles(sides[side]["delays"])
            shown.append(f"{side} median {m:.2f} s p95 {p:.2f} s "
                         f"({'falls behind' if lag_grows(sides[side]['delays']) else 'keeps up'})")
        print(f"  {rate:>6} records/s: " + "; ".join(shown))
    for side in ("timely", "spark"):
        kept = [r for r, sides in runs.items() if not lag_grows(sides[side]["delays"])]
        print(f"highest sustained rate tried, {side}: " + (f"{max(kept)} records/s" if kept else "none of those tried"))
    for line in rss_lines(main_run["rss"]):
        print(line)
    ok = all(sides["timely"]["ok"] for sides in runs.values())
    print(f"every timely run's final entities equal the batch algorithm's: {'yes' if ok else 'NO'}")


if __name__ == "__main__":
    main()
