"""Random test graphs with the awkward shapes: self-loops, duplicate edges, isolated
pairs, a long path, a star, skewed degrees."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def awkward_graph(seed: int = 0, n: int = 400) -> pa.Table:
    rng = np.random.default_rng(seed)
    parts = []
    a = rng.integers(0, n, 300)
    parts.append((a, rng.integers(0, n, 300)))                        # random
    parts.append((a[:20], a[:20]))                                    # self-loops
    parts.append((a[:30], parts[0][1][:30]))                          # duplicates
    pairs = np.arange(10_000, 10_040)
    parts.append((pairs[::2], pairs[1::2]))                           # isolated pairs
    path = rng.permutation(np.arange(20_000, 20_300))
    parts.append((path[:-1], path[1:]))                               # long path, shuffled ids
    parts.append((np.full(100, 30_000), np.arange(30_001, 30_101)))   # a star
    hub = rng.zipf(1.5, 200) % n                                      # skewed degrees
    parts.append((hub, rng.integers(0, n, 200)))
    src = np.concatenate([p[0] for p in parts]).astype(np.int64)
    dst = np.concatenate([p[1] for p in parts]).astype(np.int64)
    order = rng.permutation(len(src))
    return pa.table({"src": src[order], "dst": dst[order]})
