"""A stage boundary after a barrier stage, so that every action works on its result.

Spark runs a barrier stage only whole and alone.  A job that computes some of its
partitions (``show``, ``first``, ``take``, ``limit``, ``tail``), squeezes them
(``coalesce``), or puts two barrier RDDs into one stage (``union``) is refused with
``BarrierJobUnsupportedRDDChainException`` -- or, when the tasks of that one stage
need more slots than the cluster has (a union of two results), Spark first retries
its slot check for ten minutes.  Behind a shuffle, the barrier stage is a whole stage
of its own, needing only its own tasks' slots, and what follows is an ordinary stage.

:func:`after_barrier` adds that shuffle so that partition ``i``'s rows stay partition
``i``: it hash-partitions on a key chosen per partition, one whose Spark hash lands on
``i`` -- no sort (a round-robin ``repartition`` sorts every row first), and the
balance the workers made is kept.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["after_barrier", "spark_hash_int", "keys_to_own_partitions"]

_MASK = 0xFFFFFFFF
_SEED = 42          # the seed of Spark's HashPartitioning (Murmur3Hash's default)


def after_barrier(df: Any, partitions: Optional[int]) -> Any:
    """``df`` (the output of a barrier stage with ``partitions`` partitions) behind a
    shuffle that keeps each row in its partition; with ``partitions`` unknown (Spark
    Connect), a shuffle by partition id into the session's shuffle partitions."""
    from pyspark.sql import functions as F

    if partitions is None:
        return df.repartition(F.spark_partition_id())
    partitions = max(partitions, 1)
    keys = F.array(*[F.lit(k) for k in keys_to_own_partitions(partitions)])
    worker = F.spark_partition_id()          # more partitions than planned (never expected): any partition
    return df.repartition(partitions, F.when(worker < partitions, keys[worker]).otherwise(worker))


def keys_to_own_partitions(n: int) -> list[int]:
    """Ints ``k[i]`` whose Spark hash, modulo ``n``, is ``i`` (the smallest such ints).

    >>> keys = keys_to_own_partitions(4)
    >>> [spark_hash_int(k) % 4 for k in keys]
    [0, 1, 2, 3]
    """
    keys: list[Optional[int]] = [None] * n
    missing, k = n, 0
    while missing:
        i = spark_hash_int(k) % n
        if keys[i] is None:
            keys[i] = k
            missing -= 1
        k += 1
    return [int(key) for key in keys if key is not None]


def spark_hash_int(value: int, seed: int = _SEED) -> int:
    """Spark's ``hash()`` of an int column's value (Murmur3 x86 32-bit, as Spark's
    ``Murmur3_x86_32.hashInt``): what its hash partitioning takes modulo the partitions.

    >>> spark_hash_int(0), spark_hash_int(1)     # spark.sql("select hash(0), hash(1)")
    (933211791, -559580957)
    """
    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & _MASK

    k = (value & _MASK) * 0xCC9E2D51 & _MASK
    k = rotl(k, 15) * 0x1B873593 & _MASK
    h = rotl(seed & _MASK ^ k, 13)
    h = (h * 5 + 0xE6546B64) & _MASK
    h ^= 4                                     # the length in bytes
    h ^= h >> 16
    h = h * 0x85EBCA6B & _MASK
    h ^= h >> 13
    h = h * 0xC2B2AE35 & _MASK
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h
