"""collection: the collection a changelog table denotes (for tests, notebooks and readers)."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ParameterError
from .operators.changelog import DIFF, check_counts, consolidate_table

__all__ = ["collection"]


def collection(changelog: Union[pa.Table, pa.RecordBatch], as_of: Optional[Any] = None, time: str = "time",
               ignore: Sequence[str] = ("worker",), counts: bool = False) -> pa.Table:
    """The collection that ``changelog`` denotes: each row (every column but ``diff``,
    ``time`` and ``ignore``) as many times as its diffs sum to.

    ``changelog`` is a pyarrow Table (or RecordBatch) in the changelog convention: an
    optional int ``diff`` column (+1 adds a row, -1 withdraws one copy; absent: +1
    each), an optional ``time`` column (the name given by ``time``), and columns that
    say where a change was made rather than what (``ignore``: the ``worker`` column of
    a captured event log) -- both dropped.  ``as_of`` keeps only the changes at times
    ``<= as_of`` (integer times; ``None``: all of them).

    Returns a table of the rows sorted by their columns, each repeated by its count
    (a multiset, as a DataFrame is) -- or, with ``counts=True``, each row once with a
    ``count`` column.  A row whose diffs sum below 0 (withdrawn more often than
    added) raises :class:`~timely_spark.errors.ChangelogError` naming it.

    >>> import pyarrow as pa, timely_spark as ts
    >>> log = pa.table({"time": [0, 0, 1, 2], "x": ["a", "b", "a", "a"], "diff": [1, 1, 1, -2]})
    >>> ts.collection(log).to_pydict()
    {'x': ['b']}
    >>> ts.collection(log, as_of=1).to_pydict()
    {'x': ['a', 'a', 'b']}
    >>> ts.collection(log, as_of=1, counts=True).to_pydict()
    {'x': ['a', 'b'], 'count': [2, 1]}
    """
    table = pa.Table.from_batches([changelog]) if isinstance(changelog, pa.RecordBatch) else changelog
    if not isinstance(table, pa.Table):
        raise ParameterError(f"collection: changelog must be a pyarrow Table or RecordBatch, "
                             f"got {type(changelog).__name__}", "changelog")
    where = "collection" + ("" if as_of is None else f" as of {as_of!r}")
    if time in table.column_names:
        if as_of is not None:
            times = table[time]
            if not (pa.types.is_integer(times.type) or pa.types.is_timestamp(times.type)):
                raise ParameterError(f"collection: as_of needs a totally ordered {time!r} column, got "
                                     f"{times.type}", "as_of")
            table = table.filter(pc.less_equal(times, pa.scalar(as_of, times.type)))
        table = table.drop_columns([time])
    elif as_of is not None:
        raise ParameterError(f"collection: as_of={as_of!r} needs a {time!r} column "
                             f"(columns: {', '.join(table.column_names)})", "as_of")
    table = table.drop_columns([c for c in ignore if c in table.column_names and c != DIFF])
    summed = consolidate_table(table, where)
    check_counts(summed, where)
    columns = [c for c in summed.column_names if c != DIFF]
    summed = summed.sort_by([(c, "ascending") for c in columns]) if columns else summed
    if counts:
        return summed.rename_columns(columns + ["count"])
    repeat = np.repeat(np.arange(summed.num_rows), summed[DIFF].to_numpy())
    return summed.select(columns).take(pa.array(repeat))
