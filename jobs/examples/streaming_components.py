"""Identity resolution as a stream: Structured Streaming in, a long-running timely job, Structured Streaming out.

Three stages run at once in one Spark application:

1. a small generator writes files of records (``id``, ``email``, ``phone``) into
   ``<workdir>/input``; a Structured Streaming query turns each record into edges
   (entity ``id`` -- its email, entity ``id`` -- its phone; attribute vertices get
   negative ids) and writes them with ``writeStream.format("timely")``: each micro-batch
   is one epoch of the event log ``<workdir>/edges``;
2. a timely job on barrier workers (``ts.spark.run``) follows that log
   (``ts.capture.follow``), keeps ``ts.graph.components`` up to date incrementally and
   captures, per epoch, the vertices whose component changed into the log
   ``<workdir>/changes``;
3. a ``readStream.format("timely")`` query reads the changes and prints, per epoch,
   how many entities (records) changed their resolved identity.

It runs until Ctrl-C or for ``--seconds``; then it stops the generator, lets the sink
finish, closes the edges log (so the timely job ends by itself, closing its own log),
lets the last query read everything, and checks the final result against the batch
algorithm on all edges.

Task slots: the timely job holds its barrier slots for its whole life; the two
streaming queries need at least one more slot between them.  On the embedded default
(``local[2]``) that means one timely worker (the default here: the free slots); give
``--master local[4]`` (more slots than cores is fine on one machine) for two.

    spark-submit jobs/examples/streaming_components.py --seconds 60
    python jobs/examples/streaming_components.py --seconds 30 --rate 500 --workdir /tmp/idres

The stages live in ``timely_spark.graph.streaming`` (shared with ``jobs/benchmarks/bench_streaming.py``).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import timely_spark as ts
from timely_spark.graph.streaming import run_pipeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to run (default 60; Ctrl-C stops too)")
    parser.add_argument("--rate", type=int, default=200, help="records per second the generator writes")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between input files")
    parser.add_argument("--pool", type=int, default=2000, help="distinct emails and phones (fewer: more merges)")
    parser.add_argument("--workers", type=int, help="timely workers (default: the free task slots)")
    parser.add_argument("--workdir", help="directory for input, logs and checkpoints (default: a new temporary one)")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[2])")
    args = parser.parse_args()

    spark = ts.spark.get_session("timely streaming components", master=args.master)
    spark.sparkContext.setLogLevel("ERROR")
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="streaming_components-"))
    try:
        result = run_pipeline(spark, workdir, args.seconds, args.rate, args.interval, args.pool, args.workers)
    except KeyboardInterrupt:
        print("stopped")
        return
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"{result['records']} records, {result['epochs']} epochs, {result['edges']} edges, {result['vertices']} "
          f"vertices in {result['components']} components; final result equals the batch algorithm: "
          f"{'yes' if result['ok'] else 'NO'}")
    if not result["ok"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
