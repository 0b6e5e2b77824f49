"""Streaming offsets of an event log: its frontier, as JSON.

An offset is ``{"time": <time type>, "frontier": [<plain time>, ...], "streams": {<worker>:
<writer id>}}``: the log's frontier (elements in a fixed total order, so the same
frontier is always the same JSON), the time type that decodes it (the timestamp
protocol's description and plain values, so ``Product`` and tuple times work), and the
identity of each worker's writer seen so far -- a checkpoint of one log is refused by
another log at the same path.

>>> from timely_spark.progress import Antichain, Product
>>> desc = {"product": ["int", "int"]}
>>> o = offset({"time": desc}, desc, Antichain([Product(1, 0), Product(0, 2)]), {0: "ab"})
>>> o["frontier"], frontier(o)
([{'outer': 0, 'inner': 2}, {'outer': 1, 'inner': 0}], Antichain([Product(0, 2), Product(1, 0)]))
"""

from __future__ import annotations

from typing import Any

from ..capture.parquet import EventLogError
from ..progress import Antichain, timestamp

__all__ = ["initial", "offset", "frontier", "check_follows"]


def initial(desc: Any) -> dict:
    """The offset of a log where nothing is complete yet (its frontier is the minimum time)."""
    return offset({}, desc, Antichain([timestamp.minimum_described(desc)]), {})


def offset(previous: dict, desc: Any, front: Antichain, streams: dict) -> dict:
    """The offset of frontier ``front``; writer identities are those of ``previous`` and ``streams``."""
    known = {str(w): s for w, s in previous.get("streams", {}).items()}
    known.update({str(w): s for w, s in streams.items()})
    elements = sorted(front.elements(), key=timestamp.sort_key)
    return {"time": desc, "frontier": [timestamp.to_plain(t) for t in elements],
            "streams": {w: known[w] for w in sorted(known, key=int)}}


def frontier(off: dict) -> Antichain:
    """The frontier an offset holds."""
    desc = off["time"]
    return Antichain(timestamp.from_plain(t, desc) for t in off["frontier"])


def check_follows(path: str, earlier: dict, later: dict) -> None:
    """EventLogError unless ``later`` can follow ``earlier`` in the same log: the same time
    type, the same writer for every worker both name, and a frontier that did not go back
    (every element of ``later``'s is at or after one of ``earlier``'s)."""
    if earlier.get("time") != later.get("time"):
        raise EventLogError(f"{path}: times are {later.get('time')}, but the query's offsets are of "
                            f"{earlier.get('time')}: another event log is at this path")
    a, b = earlier.get("streams", {}), later.get("streams", {})
    for w in sorted(set(a) & set(b), key=int):
        if a[w] != b[w]:
            raise EventLogError(f"{path}: worker={w} holds another event log (writer {b[w]}) than the one the "
                                f"query read so far (writer {a[w]}); start the query with a new checkpoint")
    old, new = frontier(earlier), frontier(later)
    if not all(old.less_equal(t) for t in new):
        raise EventLogError(f"{path}: the log's frontier went back from {old} to {new}: files were removed or "
                            "the log was rewritten")
