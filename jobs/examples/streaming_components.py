"""Identity resolution as a stream: customer records in, the entity of every record kept current, in one call.

A generator writes a file of customer records (``id``, ``email``, ``phone``) every
``--interval`` seconds into ``<workdir>/input``.  Most records are new customers; a few
share an email or a phone with an earlier record (the same customer, again), and a
few share the email of one earlier entity and the phone of another (they merge).  The streaming
DataFrame of those files becomes edges (record -- its email, record -- its phone) and
goes through ``ts.spark.stream`` to ``ts.graph.components``, which keeps the connected
components up to date incrementally: a micro-batch is an epoch, and the output, a
streaming DataFrame of component changes (``vertex``, ``component``, ``diff``), is read
by a ``foreachBatch`` query printing a line per epoch.  An entity is named by its
smallest record id (attribute vertices get ids above every record's).

It runs until Ctrl-C or for ``--seconds``; then it lets the pipeline finish the input,
stops it, and checks the final entities against the batch algorithm on all edges.
Run it again with the same ``--workdir`` and it resumes where it stopped (each epoch
once).

Task slots: the timely workers hold theirs for the pipeline's life, and the streaming
queries take turns on one more; on the embedded default (``local[2]``) that is one timely
worker.  Give ``--master local[4]`` for more.

    spark-submit jobs/examples/streaming_components.py --seconds 60
    python jobs/examples/streaming_components.py --seconds 30 --rate 500 --workdir /tmp/idres
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

import timely_spark as ts
from timely_spark.graph.components_columnar import forest

#: Attribute vertices (emails, phones) get ids from here on: every record's id is smaller,
#: so an entity's component is its smallest record id.
ATTRIBUTES = 2 ** 62


class Generator(threading.Thread):
    """A file of ``rate * interval`` records every ``interval`` seconds (written under a
    hidden name, then renamed: the file source never reads half a file).  Most records
    are new customers; with probability ``repeat`` a record repeats an earlier record's
    email or phone (it joins that entity), and with probability ``merge`` it has one
    earlier record's email and another's phone (their two entities merge)."""

    def __init__(self, folder: Path, rate: int, interval: float, repeat: float, merge: float,
                 seed: int = 7) -> None:
        super().__init__(daemon=True)
        self.folder, self.rate, self.interval, self.repeat, self.merge = folder, rate, interval, repeat, merge
        self.random = random.Random(seed)
        self.stop_event = threading.Event()
        self.files = len(list(folder.glob("records-*.json")))       # a workdir resumed: go on after its files
        self.next_id = self.files * max(1, int(rate * interval))
        self.recent: list[tuple[str, str]] = []                     # (email, phone) of recent records

    def record(self, i: int) -> dict:
        email, phone = f"customer{i}@example.com", f"+1-555-{i:07d}"
        draw = self.random.random()
        if self.recent and draw < self.merge:                        # two earlier records' entities meet
            email, phone = self.random.choice(self.recent)[0], self.random.choice(self.recent)[1]
        elif self.recent and draw < self.merge + self.repeat:        # an earlier customer again
            earlier = self.random.choice(self.recent)
            email, phone = (earlier[0], phone) if self.random.random() < 0.5 else (email, earlier[1])
        self.recent.append((email, phone))
        del self.recent[:-100_000]                                   # a bounded memory of customers
        return {"id": i, "email": email, "phone": phone}

    def rows(self, n: int) -> list[dict]:
        """The next file's records: ``n`` new ones."""
        out = [self.record(i) for i in range(self.next_id, self.next_id + n)]
        self.next_id += n
        return out

    def write_file(self) -> None:
        lines = [json.dumps(r) for r in self.rows(max(1, int(self.rate * self.interval)))]
        tmp = self.folder / f".records-{self.files:06d}.json"
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, self.folder / f"records-{self.files:06d}.json")
        self.files += 1

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            self.write_file()


def edges(records: Any) -> Any:
    """Each record's two edges: its id -- its email's vertex, its id -- its phone's (with
    the record's ``diff``, if it has one: a record withdrawn withdraws its edges)."""
    from pyspark.sql import functions as F

    def attribute(prefix: str, column: str) -> Any:
        return F.lit(ATTRIBUTES) + F.pmod(F.xxhash64(F.concat(F.lit(prefix), F.col(column))), F.lit(ATTRIBUTES))

    return records.select(F.col("id").alias("src"),
                          F.explode(F.array(attribute("e:", "email"), attribute("p:", "phone"))).alias("dst"),
                          *([F.col("diff")] if "diff" in records.columns else []))


def entities(scope: Any, stream: Any) -> Any:
    """The dataflow: the components of the edges, kept up to date, records' rows only."""
    labels = ts.graph.components(stream, src="src", dst="dst")
    return labels.filter(pc.field("vertex") < ATTRIBUTES)


class EpochReport:
    """foreachBatch on the output: the records' entities kept here, a line per epoch."""

    def __init__(self) -> None:
        self.entity: dict[int, int] = {}          # record -> its entity
        self.sizes: Counter = Counter()           # entity -> records

    def __call__(self, frame: Any, batch_id: int) -> None:
        changes = frame.select("time", "vertex", "component", "diff").toPandas()
        for epoch, rows in sorted(changes.groupby("time"), key=lambda kv: kv[0]):
            known = set(self.sizes)
            gone, added = rows[rows["diff"] < 0], rows[rows["diff"] > 0]
            for vertex, component in zip(gone["vertex"], gone["component"]):
                del self.entity[vertex]
                self.sizes[component] -= 1
                if not self.sizes[component]:
                    del self.sizes[component]
            new = added[~added["vertex"].isin(gone["vertex"])]
            for vertex, component in zip(added["vertex"], added["component"]):
                self.entity[vertex] = component
                self.sizes[component] += 1
            joined = int(new["component"].isin(known).sum())
            merged = len(known - set(self.sizes))
            print(f"epoch {epoch:>3}: {len(new):>4} new records ({joined:>2} of a known entity), {merged:>2} entities "
                  f"merged ({len(gone):>3} records relabelled); {len(self.entity):,} records, "
                  f"{len(self.sizes):,} entities", flush=True)


def check(spark: Any, checkpoint: Path, report: EpochReport) -> bool:
    """The entities printed against the batch algorithm on every edge of the input log."""
    edges = ts.spark.read_event_log(spark, str(checkpoint / "input")).select("src", "dst").toArrow()
    vertices, components = forest(edges["src"].to_numpy(), edges["dst"].to_numpy())
    expected = {v: c for v, c in zip(vertices.tolist(), components.tolist()) if v < ATTRIBUTES}
    return expected == report.entity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to run (default 60; Ctrl-C stops too)")
    parser.add_argument("--rate", type=int, default=200, help="records per second the generator writes")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between input files")
    parser.add_argument("--repeat", type=float, default=0.04,
                        help="chance that a record repeats an earlier one's email or phone (default 0.04)")
    parser.add_argument("--merge", type=float, default=0.01,
                        help="chance that a record has the email of one earlier record and the phone of another, "
                             "merging their entities (default 0.01)")
    parser.add_argument("--workers", type=int, help="timely workers (default: the free task slots less one)")
    parser.add_argument("--workdir", help="directory for input, logs and checkpoints (default: a new temporary one)")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[2])")
    args = parser.parse_args()

    spark = ts.spark.get_session("timely streaming components", master=args.master)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="streaming_components-"))
    (workdir / "input").mkdir(parents=True, exist_ok=True)
    generator = Generator(workdir / "input", args.rate, args.interval, args.repeat, args.merge)
    generator.write_file()
    records = (spark.readStream.schema("id long, email string, phone string")
               .option("maxFilesPerTrigger", 1).json(str(workdir / "input")))
    report = EpochReport()
    ok = False
    try:
        with ts.spark.stream(edges(records), entities, "vertex long, component long, diff long",
                             checkpoint=str(workdir / "pipeline"), workers=args.workers) as pipeline:
            shutil.rmtree(workdir / "report", ignore_errors=True)           # the report reads every epoch
            printer = pipeline.start_output(pipeline.df.writeStream.foreachBatch(report)
                                            .option("checkpointLocation", str(workdir / "report")))
            generator.start()
            try:
                generator.join(args.seconds)
            except KeyboardInterrupt:
                print("stopping")
            generator.stop_event.set()
            generator.join()
            pipeline.input_query.processAllAvailable()                     # every file in the input log
            pipeline.await_epoch(pipeline.last_progress["epoch_in"], timeout=600)
            printer.processAllAvailable()                                  # every epoch printed
            progress = pipeline.last_progress
        ok = check(spark, workdir / "pipeline", report)
        print(f"{generator.next_id:,} records in {progress['epoch_out'] + 1} epochs: {len(report.sizes):,} entities; "
              f"final entities equal the batch algorithm's: {'yes' if ok else 'NO'}")
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
