"""Where the quick start's first job spends its time.

The quick start (``jobs/examples/connected_components.py``) times connected components of a
20,000-edge random graph and the Parquet write.  Run first in a fresh session, that
part pays for start-up that later jobs do not; this script runs, in one fresh session,
the start-up steps one at a time, each as its own small job, then the quick start's
timed part twice:

1. ``import timely_spark`` on the driver;
2. the SparkSession (the JVM starts);
3. a job without Python (the JVM's first job: scheduler, code generation, class loading);
4. a job through Python (``mapInArrow``: the executor starts its Python workers);
5. ``ts.spark.run`` of a function that returns at once (the workers import timely_spark,
   the barrier stage, the rendezvous and the mesh);
6. the quick start's timed part, then again (everything warm).

With ``--cold`` it skips steps 3 to 5, as the quick start does.

    python jobs/benchmarks/bench_first_job.py
    python jobs/benchmarks/bench_first_job.py --cold
"""

from __future__ import annotations

import argparse
import tempfile
import time

START = time.perf_counter()
import timely_spark as ts  # noqa: E402  (timed: the driver's import)

IMPORTED = time.perf_counter()
from timely_spark.graph import random_edges  # noqa: E402


def step(name: str, fn) -> None:
    start = time.perf_counter()
    fn()
    print(f"{name:58s} {time.perf_counter() - start:6.2f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cold", action="store_true", help="no warm-up steps: the quick start's order")
    parser.add_argument("--vertices", type=int, default=10_000)
    parser.add_argument("--edges", type=int, default=20_000)
    args = parser.parse_args()

    print(f"{'1. import timely_spark (driver)':58s} {IMPORTED - START:6.2f} s")
    spark = None

    def session():
        nonlocal spark
        spark = ts.spark.get_session("first job")

    step("2. SparkSession (JVM start)", session)
    assert spark is not None
    if not args.cold:
        step("3. first job, no Python (range().sum())", lambda: spark.range(1000).selectExpr("sum(id)").collect())
        step("4. first job through Python (mapInArrow, 2 tasks)",
             lambda: spark.range(2).repartition(2).mapInArrow(lambda it: it, "id long").collect())
        step("5. first ts.spark.run (workers import timely_spark, mesh)",
             lambda: ts.spark.run(spark, lambda worker: worker.index, workers=2))
    out = tempfile.mkdtemp()
    for label in ("6. the quick start's timed part", "   the same again"):
        step(label, lambda: ts.graph.connected_components(random_edges(spark, args.vertices, args.edges, 7), workers=2)
             .write.mode("overwrite").parquet(out))
    spark.stop()


if __name__ == "__main__":
    main()
