"""Edge weights a shortest-path search can use: finite and non-negative."""

from __future__ import annotations

import numpy as np

from ..errors import GraphInputError

__all__ = ["check_weights"]

def check_weights(w: np.ndarray, weight: str, where: str = "") -> None:
    """GraphInputError naming the ``weight`` column if a weight is negative, NaN or infinite.

    >>> check_weights(np.array([1.0, np.inf]), "w")
    Traceback (most recent call last):
    ...
    timely_spark.errors.GraphInputError: weight column 'w' has 1 negative, NaN or infinite \
weights (weights must be finite and >= 0)
    """
    bad = int(np.count_nonzero(~(np.isfinite(w) & (w >= 0))))
    if bad:
        raise GraphInputError(f"{where}weight column {weight!r} has {bad} negative, NaN or infinite weights "
                              f"(weights must be finite and >= 0)", weight)

