"""timely_spark: timely dataflow in Python, run on Spark barrier tasks."""

from . import progress
from ._version import __version__
from .progress import Product

__all__ = ["Product", "__version__", "progress"]
