"""compact_ids against np.unique on every path: the addressing table (dense ids), one sort
of packed (value, position) keys (sparse int64 ids), and np.unique itself (other types, or
a span too wide to pack)."""

import numpy as np
import pytest

from timely_spark.graph.compact import compact_ids


@pytest.mark.parametrize("low, high, dtype", [
    (0, 1_000, np.int64),                      # dense: the table
    (-10**12, 10**12, np.int64),               # sparse, negative ids too: packed
    (0, 2**62, np.int64),                      # too wide to pack with the positions: np.unique
    (-2**31, 2**31 - 1, np.int32),             # not int64: np.unique
])
@pytest.mark.parametrize("n", [1, 2, 7, 5_000])
def test_compact_ids_equal_numpy_unique(low, high, dtype, n):
    rng = np.random.default_rng(n)
    values = rng.integers(low, high, n, dtype=np.int64).astype(dtype)
    values[rng.integers(0, n, n // 3)] = values[0]                       # repeats
    distinct, inverse = compact_ids(values)
    want, want_inverse = np.unique(values, return_inverse=True)
    assert distinct.tolist() == want.tolist()
    assert inverse.dtype == np.int64 and inverse.tolist() == want_inverse.reshape(-1).tolist()
