"""Connected components kept current between two Spark streams (identity resolution).

:func:`follow_components` is the timely side: a worker function that follows an event
log of edges (``ts.capture.follow``), keeps ``ts.graph.components`` up to date
incrementally and captures, per completed epoch, each vertex whose component changed
into a second log -- for ``ts.spark.run`` (or ``ts.execute``) on workers that run as long
as the edges log is open.  :func:`run_pipeline` is the whole pipeline that
``jobs/examples/streaming_components.py`` runs and ``jobs/benchmarks/bench_streaming.py`` measures: a
generator of identity records, a Structured Streaming query writing edges to a
``timely`` sink, the timely job, and a ``readStream`` of the changes.

Stage 2 here keeps ``ts.graph.components`` up to date incrementally (a changelog of
edges in, of labels out) and captures each vertex whose component changed, with its
new component (every worker captures its own share of the changes log).
:func:`run_pipeline` runs the stages for a while, then stops the generator, lets the
sink finish, closes the edges log (so the timely job ends by itself, closing its own
log), lets the last query read everything, and checks the final result against the
batch algorithm.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import pyarrow as pa

from ..capture import ParquetEventWriter, compact, follow
from ..capture.follow import FOLLOW_POLL_INTERVAL
from ..spark import close_sink_log, is_connect, read_event_log, register
from ..spark import run as spark_run
from .components_columnar import forest
from .incremental_components import components

__all__ = ["follow_components", "run_pipeline", "CHANGES_SCHEMA"]

CHANGES_SCHEMA = "time long, worker long, vertex long, component long"



# ---- stage 0: the generator --------------------------------------------------------------
class Generator(threading.Thread):
    """Writes a file of ``rate * interval`` records every ``interval`` seconds (under a
    hidden name, then renamed: the file source never reads half a file)."""

    def __init__(self, folder: Path, rate: int, interval: float, pool: int, seed: int = 7) -> None:
        super().__init__(daemon=True)
        self.folder, self.rate, self.interval, self.pool = folder, rate, interval, pool
        self.random = random.Random(seed)
        self.stop_event = threading.Event()
        self.next_id = 0
        self.files = 0
        self.written: list[float] = []      # when each file landed (wall clock)

    def write_file(self) -> None:
        n = max(1, int(self.rate * self.interval))
        lines = []
        for i in range(self.next_id, self.next_id + n):
            record = {"id": i, "email": f"user{self.random.randrange(self.pool)}@example.com",
                      "phone": f"+1-555-{self.random.randrange(self.pool):07d}"}
            lines.append(json.dumps(record))
        self.next_id += n
        tmp = self.folder / f".records-{self.files:06d}.json"
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, self.folder / f"records-{self.files:06d}.json")
        self.written.append(time.time())
        self.files += 1

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.write_file()
            self.stop_event.wait(self.interval)


# ---- stage 1: records -> edges -> the timely sink ----------------------------------------
def edges_query(spark: Any, source: Path, edges_log: Path, checkpoint: Path, files_per_trigger: int = 1,
                compact_every: int = 0) -> Any:
    """The Structured Streaming query writing edges ``(src, dst)`` to the timely sink."""
    from pyspark.sql import functions as F

    def attribute(prefix: str, column: str) -> Any:     # a negative vertex id per attribute value
        return -1 - F.pmod(F.xxhash64(F.concat(F.lit(prefix), F.col(column))), F.lit(2 ** 62))

    records = (spark.readStream.schema("id long, email string, phone string")
               .option("maxFilesPerTrigger", files_per_trigger).json(str(source)))
    edges = (records.select(F.col("id").alias("src"),
                            F.explode(F.array(attribute("e:", "email"), attribute("p:", "phone"))).alias("dst"))
             .where(F.col("dst").isNotNull()))
    return (edges.writeStream.format("timely").queryName("edges").option("compact_every", str(compact_every))
            .option("checkpointLocation", str(checkpoint)).start(str(edges_log)))


# ---- stage 2: the timely job ---------------------------------------------------------------
def new_labels(time: Any, batches: list) -> list:
    """``per_time`` logic: the ``(vertex, component)`` rows ``ts.graph.components`` adds
    at ``time`` (``diff > 0``): each vertex whose component changed (or that is new),
    with its new component.  The changelog is consolidated per time, so a vertex has at
    most one such row per time; the pipeline only adds edges, so no vertex leaves."""
    import pyarrow.compute as pc

    out = []
    for batch in batches:
        kept = batch.filter(pc.greater(batch.column("diff"), 0))
        if kept.num_rows:
            out.append(kept.select(["vertex", "component"]))
    return out


#: The columns the timely job captures into the changes log.
CHANGES_COLUMNS = pa.schema([("vertex", pa.int64()), ("component", pa.int64())])


def rss_mb() -> float:
    """This process's resident set size, MiB (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20
    except (OSError, ValueError, IndexError):
        return 0.0


def follow_components(edges_log: str, changes_log: str, poll: float = FOLLOW_POLL_INTERVAL,
               sample_every: float = 0.0) -> Callable:
    """The worker function: follow the edges log, keep the components, capture the
    changes (each worker its own share of the log; a worker with none still moves its
    frontier) until the edges log is closed.  Returns the worker's RSS samples
    ``[(seconds, MiB)]`` every ``sample_every`` seconds (0: none)."""
    def work(worker: Any) -> list:
        writer = ParquetEventWriter(changes_log, worker=worker.index, peers=worker.peers, flush_seconds=0.0,
                                    schema=CHANGES_COLUMNS)

        def build(scope: Any) -> Any:
            labels = components(follow(edges_log, scope, poll=poll), src="src", dst="dst")
            changes = labels.per_time(new_labels)
            changes.capture_into(writer)
            return changes.probe()

        probe = worker.dataflow(build)
        samples: list = []
        start = time.monotonic()

        def running() -> bool:
            now = time.monotonic() - start
            if sample_every and (not samples or now - samples[-1][0] >= sample_every):
                samples.append((now, rss_mb()))
            return not probe.done()

        worker.step_while(running)
        writer.close()
        return samples

    return work


# ---- stage 3: the changes, read back as a stream -------------------------------------------
#: Over Spark Connect, the in-memory table of the changes query: changed entities per epoch.
CHANGE_COUNTS = "timely_spark_change_counts"


class ChangeCounts:
    """foreachBatch sink: per epoch, how many entities (vertex >= 0) changed."""

    def __init__(self, printer: Optional[Callable[[str], None]] = print) -> None:
        self.counts: dict[int, int] = {}
        self.seen: dict[int, float] = {}      # epoch -> when its changes reached this query
        self.printer = printer
        self.lock = threading.Lock()

    def __call__(self, frame: Any, batch_id: int) -> None:
        rows = frame.where("vertex >= 0").groupBy("time").count().collect()
        now = time.time()
        times = [r["time"] for r in frame.select("time").distinct().collect()]
        with self.lock:
            for t in times:
                self.seen.setdefault(t, now)
            for r in sorted(rows, key=lambda r: r["time"]):
                self.counts[r["time"]] = self.counts.get(r["time"], 0) + r["count"]
                if self.printer:
                    self.printer(f"epoch {r['time']}: {r['count']} entities changed")


def changes_query(spark: Any, changes_log: Path, checkpoint: Path, sink: ChangeCounts) -> Any:
    """The query reading the changes into ``sink`` -- over Spark Connect, where a
    ``foreachBatch`` function runs in the server's Python (its counts would stay there),
    into the in-memory table :data:`CHANGE_COUNTS` of the changed entities per epoch (one
    row an epoch), which :func:`counted` reads into ``sink`` once the query has stopped."""
    changes = spark.readStream.format("timely").schema(CHANGES_SCHEMA).load(str(changes_log))
    if is_connect(spark):
        return (changes.where("vertex >= 0").groupBy("time").count().writeStream.queryName(CHANGE_COUNTS)
                .outputMode("complete").format("memory").option("checkpointLocation", str(checkpoint)).start())
    return (changes.writeStream.queryName("changes").option("checkpointLocation", str(checkpoint))
            .foreachBatch(sink).start())


def counted(spark: Any, sink: ChangeCounts) -> None:
    """Over Spark Connect, after :func:`changes_query` stopped: its per-epoch counts into ``sink``."""
    if is_connect(spark):
        for r in spark.table(CHANGE_COUNTS).collect():
            sink.counts[r["time"]] = r["count"]


# ---- the whole pipeline --------------------------------------------------------------------
def final_check(spark: Any, edges_log: Path, changes_log: Path) -> dict:
    """The changes, consolidated (each vertex's last component), against the batch
    algorithm (``ts.graph.forest``) on every edge in the edges log."""
    edges = read_event_log(spark, str(edges_log)).select("src", "dst").toArrow()
    v, c = forest(edges["src"].to_numpy(), edges["dst"].to_numpy())
    expected = dict(zip(v.tolist(), c.tolist()))
    changes = read_event_log(spark, str(changes_log)).select("time", "vertex", "component").toArrow()
    order = np.argsort(changes["time"].to_numpy(), kind="stable")
    latest = dict(zip(changes["vertex"].to_numpy()[order].tolist(), changes["component"].to_numpy()[order].tolist()))
    epochs = len(set(read_event_log(spark, str(edges_log)).select("time").toArrow()["time"].to_pylist()))
    return {"ok": latest == expected, "vertices": len(expected), "edges": edges.num_rows, "epochs": epochs,
            "components": len(set(expected.values()))}


def _watch_commits(edges_log: Path, committed: dict, stop: threading.Event) -> None:
    """Until ``stop``: when each epoch's commit became visible (the sink's state, polled)."""
    state_file, last = edges_log / "_sink" / "state.json", 0
    while not stop.wait(0.01):
        try:
            frontier = json.loads(state_file.read_text())["frontier"]
        except (OSError, ValueError, KeyError):
            continue
        now = time.time()
        for e in range(last, frontier):
            committed[e] = now
        last = max(last, frontier)
    stop.set()


def _compact_changes(changes_log: Path, every: int, stop: threading.Event) -> None:
    """Until ``stop``: compact the changes log every 10 s."""
    while not stop.wait(10.0):
        if (changes_log / "worker=0").is_dir():
            compact(changes_log, min_files=every)


def run_pipeline(spark: Any, workdir: Path, seconds: float, rate: int = 200, interval: float = 1.0,
                 pool: int = 2000, workers: Optional[int] = None, printer: Optional[Callable] = print,
                 min_epochs: int = 0, timeout: float = 600.0, compact_every: int = 0, sample_every: float = 0.0,
                 watch: bool = False, checkpoint: Optional[str] = None,
                 snapshot_every: Optional[float] = None) -> dict:
    """Run the three stages for ``seconds`` (and until at least ``min_epochs`` epochs
    were committed), stop them in order, and return the final check and the counts.
    ``compact_every``: the sink's option (and the changes log is compacted as often);
    ``sample_every``: the timely workers' RSS samples; ``watch``: record when each
    epoch's commit became visible in the edges log (``committed``); ``checkpoint`` and
    ``snapshot_every``: the timely job's snapshots (see ``ts.spark.run``)."""
    workdir = Path(workdir)
    source, edges_log, changes_log = workdir / "input", workdir / "edges", workdir / "changes"
    source.mkdir(parents=True, exist_ok=True)
    register(spark)
    generator = Generator(source, rate, interval, pool)
    generator.write_file()                               # the sink's first micro-batch
    sink = edges_query(spark, source, edges_log, workdir / "ckpt-edges", compact_every=compact_every)
    counts = ChangeCounts(printer)
    reader = changes_query(spark, changes_log, workdir / "ckpt-changes", counts)
    outcome: dict = {}

    def timely() -> None:
        try:
            outcome["result"] = spark_run(spark, follow_components(str(edges_log), str(changes_log),
                                                               sample_every=sample_every),
                                             workers=workers, timeout=timeout, checkpoint=checkpoint,
                                             snapshot_every=snapshot_every)
        except BaseException as exc:        # reported by the main thread
            outcome["error"] = exc

    committed: dict[int, float] = {}
    stop_watch = threading.Event()

    helpers = [threading.Thread(target=_watch_commits, args=(edges_log, committed, stop_watch), daemon=True)
               ] if watch else []
    helpers += [threading.Thread(target=_compact_changes, args=(changes_log, compact_every, stop_watch), daemon=True)
                ] if compact_every else []
    job = threading.Thread(target=timely, name="timely job", daemon=True)
    started = time.monotonic()
    try:
        for helper in helpers:
            helper.start()
        job.start()
        generator.start()
        while time.monotonic() - started < seconds or generator.files < min_epochs:
            if "error" in outcome:
                break
            time.sleep(0.2)
    finally:
        generator.stop_event.set()
        generator.join()
        if sink.isActive:
            sink.processAllAvailable()
        sink.stop()
        if (edges_log / "_sink").exists():
            close_sink_log(edges_log)           # the timely job ends once it has read everything
        job.join(timeout)
        if reader.isActive:
            reader.processAllAvailable()
        reader.stop()
        counted(spark, counts)
        stop_watch.set()
        for helper in helpers:
            helper.join()
    if "error" in outcome:
        raise outcome["error"]
    check = final_check(spark, edges_log, changes_log)
    files = {name: sum(1 for _ in (workdir / name).glob("worker=*/part-*.parquet")) for name in ("edges", "changes")}
    return {**check, "records": generator.next_id, "changes": dict(counts.counts), "seen": dict(counts.seen),
            "committed": committed, "written": list(generator.written), "rss": outcome.get("result"),
            "files": files}
