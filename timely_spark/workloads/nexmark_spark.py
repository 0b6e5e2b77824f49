"""Nexmark q0-q8 in Spark, as a PySpark user writes them: the reference side of the benchmark.

Each query is a function ``(people, auctions, bids) -> DataFrame`` of three DataFrames
of the :mod:`.nexmark` schemas -- streaming (``spark.readStream``) or batch -- with the
definitions of :mod:`.nexmark_queries`.  Structured Streaming runs q0-q3 as streams (a
projection, a filter, a stream-stream join); q4-q8 chain stateful operators (an
aggregate over a join's result, an aggregate over an aggregate, a join of windowed
aggregates with the stream) that Structured Streaming refuses without watermarks and
event-time-bounded joins, so :data:`STREAMING` lists only q0-q3 and the others run as a
batch query over the events so far, as a Spark user recomputes them.

>>> sorted(STREAMING)
['q0', 'q1', 'q2', 'q3']
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import SparkJobError
from .nexmark_queries import Q6_LAST

__all__ = ["SPARK_QUERIES", "STREAMING", "run_spark"]

EURO_PER_DOLLAR = 0.908
TUMBLE, SLIDE_PERIOD, SLIDE_EVERY = "10 seconds", "10 seconds", "2 seconds"


def _f() -> Any:
    from pyspark.sql import functions

    return functions


def q0(people: Any, auctions: Any, bids: Any) -> Any:
    return bids.select("auction", "bidder", "price", "channel", "url", "date_time")


def q1(people: Any, auctions: Any, bids: Any) -> Any:
    return bids.select("auction", "bidder", "date_time", (_f().col("price") * EURO_PER_DOLLAR).alias("price"))


def q2(people: Any, auctions: Any, bids: Any) -> Any:
    return bids.where(_f().col("auction") % 123 == 0).select("auction", "price")


def q3(people: Any, auctions: Any, bids: Any) -> Any:
    f = _f()
    local = people.where(f.col("state").isin("OR", "ID", "CA")).select("id", "name", "city", "state")
    chosen = auctions.where(f.col("category") == 10).select(f.col("id").alias("auction_id"), "seller")
    joined = local.join(chosen, local["id"] == chosen["seller"])
    return joined.select("name", "city", "state", f.col("auction_id").alias("id"))


def _winning(auctions: Any, bids: Any, *by: str) -> Any:
    f = _f()
    a = auctions.select(f.col("id").alias("a_id"), *dict.fromkeys([*by, "expires"]), f.col("date_time").alias("opened"))
    valid = bids.join(a, (bids["auction"] == a["a_id"]) & (bids["date_time"] >= a["opened"])
                      & (bids["date_time"] <= a["expires"]))
    return valid.groupBy("a_id", *by).agg(f.max("price").alias("price_max"))


def q4(people: Any, auctions: Any, bids: Any) -> Any:
    return _winning(auctions, bids, "category").groupBy("category").agg(_f().avg("price_max").alias("price_max_mean"))


def q5(people: Any, auctions: Any, bids: Any) -> Any:
    f = _f()
    counts = bids.groupBy(f.window("date_time", SLIDE_PERIOD, SLIDE_EVERY), "auction").agg(f.count("*").alias("n"))
    counts = counts.select(f.col("window.start").alias("window_start"), f.col("window.end").alias("window_end"),
                           "auction", "n")
    most = counts.groupBy("window_start", "window_end").agg(f.max("n").alias("n"))
    return counts.join(most, ["window_start", "window_end", "n"]).select(
        "window_start", "window_end", "auction", f.col("n").alias("count_all"))


def q6(people: Any, auctions: Any, bids: Any) -> Any:
    from pyspark.sql import Window
    f = _f()
    latest = Window.partitionBy("seller").orderBy(f.col("expires").desc(), f.col("a_id").desc())
    last = _winning(auctions, bids, "seller", "expires").withColumn("n", f.row_number().over(latest)) \
        .where(f.col("n") <= Q6_LAST)
    return last.groupBy("seller").agg(f.avg("price_max").alias("price_max_mean"))


def q7(people: Any, auctions: Any, bids: Any) -> Any:
    f = _f()
    placed = bids.withColumn("window_start", f.window("date_time", TUMBLE).start)
    highest = placed.groupBy("window_start").agg(f.max("price").alias("price"))
    return placed.join(highest, ["window_start", "price"]).select("auction", "bidder", "price", "date_time",
                                                                   "window_start")


def q8(people: Any, auctions: Any, bids: Any) -> Any:
    f = _f()
    p = people.select("id", "name", f.window("date_time", TUMBLE).start.alias("window_start"))
    a = auctions.select(f.col("seller").alias("id"), f.window("date_time", TUMBLE).start.alias("window_start"))
    return p.join(a, ["id", "window_start"]).select("id", "name", "window_start").distinct()


SPARK_QUERIES: dict[str, Callable[[Any, Any, Any], Any]] = {
    "q0": q0, "q1": q1, "q2": q2, "q3": q3, "q4": q4, "q5": q5, "q6": q6, "q7": q7, "q8": q8}
STREAMING = frozenset({"q0", "q1", "q2", "q3"})


def _frames(spark: Any, directory: str, streaming: bool, files_per_trigger: int) -> list:
    frames = []
    for kind in ("people", "auctions", "bids"):
        path = f"{directory}/{kind}"
        if streaming:
            schema = spark.read.parquet(path).schema
            frames.append(spark.readStream.schema(schema).option("maxFilesPerTrigger", files_per_trigger)
                          .parquet(path))
        else:
            frames.append(spark.read.parquet(path))
    return frames


def run_spark(spark: Any, query: str, directory: str, collect: bool = True, files_per_trigger: int = 1,
              timeout: float = 1800.0) -> tuple[Any, float, list[float]]:
    """Run ``query`` on the events under ``directory`` (written by
    :func:`~timely_spark.workloads.nexmark.write_parquet`): a stream through a memory sink
    (``collect``) or a ``noop`` sink, ``files_per_trigger`` files of each kind a
    micro-batch, for the queries in :data:`STREAMING`; a batch query otherwise.  Returns
    the answer as a pyarrow Table (None unless ``collect``), the seconds it took, and the
    seconds of each micro-batch (empty for a batch query).  A stream not done within
    ``timeout`` seconds is stopped: SparkJobError."""
    import time

    start = time.perf_counter()
    frame = SPARK_QUERIES[query](*_frames(spark, directory, query in STREAMING, files_per_trigger))
    if query not in STREAMING:
        if collect:
            table = frame.toArrow()
        else:
            frame.write.format("noop").mode("overwrite").save()
            table = None
        return table, time.perf_counter() - start, []
    name = f"nexmark_{query}_{time.monotonic_ns()}"
    writer = frame.writeStream.outputMode("append").trigger(availableNow=True)
    running = (writer.format("memory").queryName(name) if collect else writer.format("noop")).start()
    try:
        if not running.awaitTermination(timeout):
            raise SparkJobError(f"nexmark {query}: the Spark stream did not finish within {timeout} s")
        seconds = time.perf_counter() - start
        batches = [p["durationMs"].get("triggerExecution", 0) / 1000.0 for p in running.recentProgress
                   if p.get("numInputRows", 0)]
    finally:
        running.stop()
    table = spark.table(name).toArrow() if collect else None
    if collect:
        spark.catalog.dropTempView(name)
    return table, seconds, batches
