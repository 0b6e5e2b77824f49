"""The operator of a batch graph loop: edges in, the loop's messages in, two named outputs.

PageRank's and shortest paths' batch forms are one operator inside ``scope.iterative``:
the edges enter exchanged by their source, the messages of the previous round come back
through the loop's feedback edge, and each completed time ``Product(outer, round)`` is
handed to the algorithm's ``step`` once, in time order, with the edges and messages that
arrived at it.  :class:`LoopRounds` is that shape once; the algorithms give the parse of
an edge batch and the step.  :func:`stream_round` is the shape the stream forms'
per-round logic shares.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

import pyarrow as pa

from ..dataflow import ExchangeBy, OperatorBuilder, check_batch
from ..progress import Product, sort_key

if TYPE_CHECKING:
    from ..dataflow import Stream

__all__ = ["LoopRounds", "message_table", "as_product", "stream_round"]


def as_product(t: Any) -> Product:
    """``t`` as a :class:`~timely_spark.progress.Product` (a tuple ``(outer, inner)`` becomes one).

    >>> as_product((3, 1)).inner
    1
    """
    return t if isinstance(t, Product) else Product(*t)


def message_table(batches: list) -> Optional[pa.Table]:
    """A round's message batches as one table; ``None`` if there are no rows.

    >>> message_table([]) is None, message_table([pa.record_batch({"kind": [0]})]).num_rows
    (True, 1)
    """
    table = pa.Table.from_batches(batches) if batches else None
    return table if table is not None and table.num_rows else None


def stream_round(t: Any, edge_batches: list, msg_batches: list, edges_in: Callable[[Any, list, list], None],
                 messages: Callable[[Product, pa.Table, list], None]) -> list:
    """One completed time of an incremental graph loop's ``per_time`` logic: at round 0
    the time's non-empty edge batches go to ``edges_in(outer, batches, out)``, at later
    rounds the messages (if any rows) to ``messages(time, table, out)``; the batches
    they put in ``out`` are returned.

    >>> seen = []
    >>> stream_round((0, 1), [], [pa.record_batch({"kind": [2]})], None, lambda t, m, out: seen.append(m.num_rows))
    []
    >>> seen
    [1]
    """
    t = as_product(t)
    out: list = []
    if t.inner == 0:
        edges_in(t.outer, [b for b in edge_batches if b.num_rows], out)
        return out
    table = message_table(msg_batches)
    if table is not None:
        messages(t, table, out)
    return out


class LoopRounds:
    """One operator in the loop scope ``inner``: input ``edges`` (entered into the loop,
    exchanged by column ``src``), input the loop's messages (routed by ``pact``),
    outputs ``messages`` (fed back, one round later) and ``results`` (leave the loop).

    :meth:`run` builds it: each edge batch becomes ``parse(batch)``; once a time is
    complete at both inputs, ``step(time, capability, edge_parts, message_batches)`` is
    called, times in order; then ``after(message frontier)`` if given.
    """

    def __init__(self, inner: Any, edges: "Stream", src: str, pact: Any, name: str,
                 outputs: tuple[str, str] = ("messages", "results")) -> None:
        self.name = name
        self.handle, cycle = inner.feedback(1)
        self.builder = b = OperatorBuilder(inner, name)
        self.edge_in = b.new_input(edges.enter(inner), ExchangeBy([src], name))
        self.msg_in = b.new_input(cycle, pact)
        self.out_msgs, self.msgs = b.new_output(outputs[0])
        self.out_results, self.results = b.new_output(outputs[1])
        b.initial_capability().drop()
        self.pending: dict = {}                 # time -> [capability, edge parts, message batches]

    def hold(self, cap: Any) -> list:
        """The entry of ``cap``'s time (made, with the capability retained, if new)."""
        entry = self.pending.get(cap.time)
        if entry is None:
            entry = self.pending[cap.time] = [cap.retain(), [], []]
        return entry

    def _receive(self, parse: Callable[[pa.RecordBatch], Any]) -> None:
        for cap, data in self.edge_in:
            entry = self.hold(cap)
            for record in data:
                batch = check_batch(record, self.name)
                if batch.num_rows:
                    entry[1].append(parse(batch))
        for cap, data in self.msg_in:
            self.hold(cap)[2].extend(data)

    def run(self, parse: Callable[[pa.RecordBatch], Any], step: Callable[[Product, Any, list, list], None],
            after: Optional[Callable[[Any], None]] = None) -> "Stream":
        """Build the operator (see the class); the ``results`` stream, out of the loop."""
        pending, edge_in, msg_in = self.pending, self.edge_in, self.msg_in

        def logic() -> None:
            self._receive(parse)             # (nothing received is held here through the steps)
            ef, mf = edge_in.frontier, msg_in.frontier
            for t in sorted((t for t in pending if not ef.less_equal(t) and not mf.less_equal(t)), key=sort_key):
                cap, edge_parts, msg_parts = pending.pop(t)
                step(as_product(t), cap, edge_parts, msg_parts)
                cap.drop()
            if after is not None:
                after(mf)

        self.builder.build(logic, notify=True)
        self.msgs.connect_loop(self.handle)
        return self.results.leave()
