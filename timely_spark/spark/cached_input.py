"""An input that Spark holds in its cache already, read by the barrier tasks as it is.

A user who runs several jobs over one DataFrame caches it, often with as many
partitions as workers (``edges = df.repartition(N).cache(); edges.count()``).  Its
plan does not end in a shuffle by key, so ``transform(workers=N)`` cannot tell from
the plan alone that the partitions are the workers' already, and would spread them over
the workers again (:mod:`.arrow_spread`): a ``mapInArrow`` stage and a shuffle of data
that sits in the executors' memory in exactly the partitions wanted.

:func:`cached_partitions` looks at the cache instead: when ``df``'s physical plan is a
scan of a cached relation (``InMemoryTableScanExec``) with only projections and
filters above it (which keep the partitions), and every partition of that cache is
loaded, it gives the cache's partition count; the barrier stage then reads those
partitions, one a task, with no stage before it.  A cache that is not loaded (or not
wholly: a block evicted) is not read directly: its barrier tasks would first compute
it, all at once, in one stage.  Over Spark Connect the plan cannot be read, so the
answer is "not known" (None) and the input is spread.
"""

from __future__ import annotations

from typing import Any, Optional

from .connect import is_connect

__all__ = ["cached_partitions"]

#: Plan nodes between the cached scan and the DataFrame that keep its partitions, one
#: to one (and run in the same tasks).
_NARROW = ("ProjectExec", "FilterExec")


def _name(node: Any) -> str:
    return str(node.getClass().getSimpleName())


def cached_partitions(df: Any) -> Optional[int]:
    """The partition count of the cache ``df`` reads, when ``df`` is a projection or
    filter of one cached relation whose partitions are all loaded in Spark's cache; None
    when that is not so or not known (Spark Connect, another Spark's plan classes).
    Looks at the plan and the block manager's record of the cache; runs no Spark job.

    With ``transform(df, ..., workers=N)``, an input whose ``cached_partitions`` is ``N``
    is read by the ``N`` barrier tasks from the cache, one cached partition each, with
    no shuffle before them. Example (needs a SparkSession ``spark``)::

        edges = spark.read.parquet("edges").repartition(2).cache()
        ts.spark.cached_partitions(edges)     # None: not loaded yet
        edges.count()                         # loads every partition
        ts.spark.cached_partitions(edges)     # 2
        ts.spark.cached_partitions(edges.select("src"))   # 2: a projection of it
    """
    if is_connect(df.sparkSession):
        return None
    try:
        plan = df._jdf.queryExecution().sparkPlan()
        while _name(plan) in _NARROW:
            plan = plan.child()
        if _name(plan) != "InMemoryTableScanExec":
            return None
        builder = plan.relation().cacheBuilder()
        if not builder.isCachedColumnBuffersLoaded():
            return None
        return int(builder.cachedColumnBuffers().getNumPartitions()) or None
    except Exception:       # Spark Connect, another Spark's plan classes: not known, the input is spread
        return None
