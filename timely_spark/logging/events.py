"""Engine events, as in the Rust crate's logging: what happened, when, on which worker.

Every event is one flat record (a dict with the same keys, so that a log of them is
a table): ``elapsed`` (seconds since the worker started), ``worker``, ``event`` (the
kind) and the fields that kind uses -- the others are -1 or "".

==========  ================================================================
event       fields
==========  ================================================================
operator    ``operator`` (id), ``address`` ("0.2.1"), ``name``
channel     ``channel`` (id), ``source`` / ``target`` ("address:port")
schedule    ``operator``, ``start`` (True when it starts, False when it stops)
messages    ``channel``, ``operator``, ``count`` (records), ``start`` (True: sent)
progress    ``address`` (the scope), ``count`` (updates in the batch)
frontier    ``name`` (a probe), ``frontier`` (its frontier: a tuple of times, least first),
            ``detail`` (the same as text, for people)
shutdown    ``address`` (a dataflow whose work is complete)
state       ``name`` (a graph operator), ``count`` (rows it holds), ``frontier`` (the time, a
            1-tuple); on the ``"graph"`` stream (``timely_spark.graph.GRAPH_LOG``), not ``"timely"``
visits      the same fields, ``count`` the visits a round of the stream components' split
            search took on the worker; on ``"graph"``
reached     the same, ``count`` the vertices those visits reached first
==========  ================================================================
"""

from __future__ import annotations

from typing import Any

__all__ = ["FIELDS", "event"]

FIELDS = ("elapsed", "worker", "event", "operator", "channel", "address", "name", "source", "target",
          "start", "count", "detail", "frontier")

_DEFAULTS = {"operator": -1, "channel": -1, "address": "", "name": "", "source": "", "target": "",
             "start": False, "count": 0, "detail": "", "frontier": ()}


def event(elapsed: float, worker: int, kind: str, **fields: Any) -> dict:
    """One event record with every field of :data:`FIELDS` (defaults for those not given).

    >>> event(0.5, 1, "frontier", name="probe", frontier=(3,))["frontier"]
    (3,)
    """
    record = {"elapsed": elapsed, "worker": worker, "event": kind}
    for key in FIELDS[3:]:
        record[key] = fields.get(key, _DEFAULTS[key])
    return record
