"""Random edge lists on Spark that do not depend on how the rows are partitioned."""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["random_edges"]


def random_edges(spark: Any, vertices: int, edges: int, seed: int, src: str = "src", dst: str = "dst",
                 partitions: Optional[int] = None) -> Any:
    """A lazy Spark DataFrame of ``edges`` random edges ``(src, dst)`` over the ids
    ``0..vertices-1``.  Edge ``i`` is row id ``i`` hashed with ``seed`` and two salts
    (Spark's ``xxhash64``), so the graph depends only on ``vertices``, ``edges`` and
    ``seed`` -- the same on any master and any ``partitions`` (``F.rand`` is seeded per
    partition, so a graph made with it changes with the master's parallelism).

    >>> edges = ts.graph.random_edges(spark, vertices=100, edges=300, seed=7)  # doctest: +SKIP
    >>> ts.graph.connected_components(edges).count()                           # doctest: +SKIP
    100
    """
    from pyspark.sql import functions as F

    def pick(salt: int) -> Any:
        return F.pmod(F.xxhash64(F.lit(seed), F.lit(salt), F.col("id")), F.lit(vertices))

    return spark.range(0, edges, 1, partitions).select(pick(0).alias(src), pick(1).alias(dst))
