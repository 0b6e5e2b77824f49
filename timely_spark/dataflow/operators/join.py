"""join: two streams of record batches joined on key columns, per time.

Both inputs are exchanged by the key columns, so matching rows meet on one worker.
A time's batches are kept on both sides until the time is complete at both inputs,
then joined with Arrow's hash join (``pyarrow.Table.join``).  A time with rows on one
side only still produces what the join type says (for example the unmatched rows of
a left join).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence, Union

from ...errors import BuildError
from ...progress import sort_key
from ..operator import OperatorBuilder
from .exchange_by import ExchangeBy, check_batch, check_columns, key_list
from .group_by import tables_of

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["join", "JOIN_TYPES"]

#: The join types, as pyarrow names them.
JOIN_TYPES = {"inner": "inner", "left": "left outer", "left outer": "left outer", "semi": "left semi",
              "left semi": "left semi", "anti": "left anti", "left anti": "left anti",
              "right": "right outer", "right outer": "right outer", "outer": "full outer",
              "full outer": "full outer"}


def join(stream: "Stream", other: "Stream", keys: Union[str, Sequence[str]], join_type: str = "inner",
         name: str = "Join") -> "Stream":
    """Join this stream's record batches with ``other``'s on ``keys``, per time, once
    the time is complete on both inputs.  ``join_type``: ``inner``, ``left``,
    ``semi``, ``anti``, ``right`` or ``outer``.  Non-key columns of ``other`` that
    clash with this stream's get the suffix ``_right``.

    >>> import pyarrow as pa, timely_spark as ts
    >>> users = pa.table({"id": [1, 2], "name": ["ann", "bob"]})
    >>> clicks = pa.table({"id": [1, 1, 3], "page": ["home", "cart", "help"]})
    >>> _ = ts.example(lambda s: s.to_stream(clicks).join(s.to_stream(users), "id")
    ...                .inspect(lambda rb: print(sorted(rb.to_pylist(), key=str))))
    [{'id': 1, 'page': 'cart', 'name': 'ann'}, {'id': 1, 'page': 'home', 'name': 'ann'}]
    """
    keys = key_list(keys, name)
    how = JOIN_TYPES.get(join_type)
    if how is None:
        raise BuildError(f"operator {name!r}: join_type {join_type!r} is not one of {', '.join(JOIN_TYPES)}")
    b = OperatorBuilder(stream.scope, name)
    left = b.new_input(stream, ExchangeBy(keys, name))
    right = b.new_input(other, ExchangeBy(keys, name))
    out, result = b.new_output()
    b.initial_capability().drop()
    held: dict[Any, list] = {}                  # time -> [capability, left batches, right batches]
    schemas: list[Any] = [None, None, None]      # per side (1, 2): the schema seen last

    def receive(port: Any, side: int) -> None:
        for cap, data in port:
            entry = held.get(cap.time)
            if entry is None:
                entry = held[cap.time] = [cap.retain(), [], []]
            for record in data:
                batch = check_batch(record, name)
                check_columns(batch, keys, name)
                entry[side].append(batch)
                schemas[side] = batch.schema

    def table(batches: list, side: int, t: Any) -> Any:
        if batches:
            return tables_of(batches, name, t)
        return None if schemas[side] is None else schemas[side].empty_table()

    def logic() -> None:
        receive(left, 1)
        receive(right, 2)
        complete = [t for t in held if not left.frontier.less_equal(t) and not right.frontier.less_equal(t)]
        for t in sorted(complete, key=sort_key):
            cap, lefts, rights = held.pop(t)
            lt, rt = table(lefts, 1, t), table(rights, 2, t)
            if lt is not None and rt is not None:
                joined = lt.join(rt, keys, join_type=how, right_suffix="_right", use_threads=False)
            elif lt is not None and how in ("left outer", "full outer", "left anti"):
                joined = lt          # the right side has never shown its columns
            elif rt is not None and how in ("right outer", "full outer"):
                joined = rt
            else:
                joined = None
            if joined is not None and joined.num_rows:
                out.session(cap).give_batch(joined.combine_chunks().to_batches())
            cap.drop()

    b.build(logic, notify=True)
    return result
