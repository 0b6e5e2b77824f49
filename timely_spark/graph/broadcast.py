"""One key per worker that a vertex-keyed exchange sends to that worker: how a graph
operator addresses every worker (or one) through ``ExchangeBy(["vertex"])``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..dataflow import destinations

__all__ = ["broadcast_keys"]

def broadcast_keys(peers: int) -> np.ndarray:
    """One int64 key per worker that ``ExchangeBy(["vertex"])`` sends to that worker."""
    candidates = np.arange(-1, -64 * peers - 64, -1, dtype=np.int64)
    dest = destinations(pa.record_batch({"vertex": candidates}), ["vertex"], peers)
    keys = np.full(peers, 0, np.int64)
    found = np.zeros(peers, bool)
    for w in range(peers):
        hit = np.flatnonzero(dest == w)
        if len(hit):
            keys[w], found[w] = candidates[hit[0]], True
    if not found.all():
        raise RuntimeError(f"no broadcast key found for {peers} workers")
    return keys

