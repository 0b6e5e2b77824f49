"""The jobs' own modules, importable from the tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "jobs"))

from stream_to_parquet import capture_views  # noqa: E402

from timely_spark.graph import union_find  # noqa: E402

__all__ = ["capture_views", "union_find"]
