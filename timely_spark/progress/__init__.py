"""Progress tracking: timestamps, path summaries, antichains and pointstamp tracking.

Pure bookkeeping: this layer imports nothing else from ``timely_spark``.
"""

from .antichain import Antichain, MutableAntichain
from .change_batch import ChangeBatch
from .location import Location, Source, Target
from .operate import Operate, SharedProgress
from .reachability import Builder, CycleError, Tracker
from .summary import MAX_INT, Add, ProductSummary, TupleSummary, advance, identity
from .timestamp import Product, check_time, less_equal, less_than, minimum, order_of, sort_key

__all__ = [
    "Add",
    "Antichain",
    "Builder",
    "ChangeBatch",
    "CycleError",
    "Location",
    "MAX_INT",
    "MutableAntichain",
    "Operate",
    "Product",
    "ProductSummary",
    "SharedProgress",
    "Source",
    "Target",
    "Tracker",
    "TupleSummary",
    "advance",
    "check_time",
    "identity",
    "less_equal",
    "less_than",
    "minimum",
    "order_of",
    "sort_key",
]
