"""Progress tracking: timestamps, path summaries, antichains and pointstamp tracking.

Pure bookkeeping: this layer imports nothing else from ``timely_spark`` but its errors.
"""

from .antichain import Antichain, MutableAntichain
from .change_batch import ChangeBatch
from .location import Location, Source, Target
from .operate import Operate, SharedProgress
from .reachability import Builder, CycleError, Tracker
from .summary import MAX_INT, Add, ProductSummary, TupleSummary
from .timestamp import (
    Product,
    TimeKind,
    advance,
    check_time,
    identity,
    kind_of,
    less_equal,
    less_than,
    minimum,
    order_of,
    sort_key,
)

__all__ = [
    # timestamps and their order
    "MAX_INT", "Product", "TimeKind", "check_time", "kind_of", "less_equal", "less_than", "minimum", "order_of",
    "sort_key",
    # path summaries
    "Add", "ProductSummary", "TupleSummary", "advance", "identity",
    # frontiers and counted changes
    "Antichain", "ChangeBatch", "MutableAntichain",
    # pointstamp tracking: locations, reachability, the subgraph protocol
    "Builder", "CycleError", "Location", "Operate", "SharedProgress", "Source", "Target", "Tracker",
]
