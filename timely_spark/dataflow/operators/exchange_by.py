"""exchange_by: route the rows of Arrow record batches to workers by key columns.

Each row goes to the worker its key hashes to (:func:`.key_hash.destinations`), the
hash computed in vectorized code, identical in every process and on every machine.  Each input
batch becomes at most one batch per destination (a sort by destination and zero-copy
slices), and empty pieces are not sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence, Union

import numpy as np
import pyarrow as pa

from ...errors import BuildError
from .key_hash import destinations
from .pipe import pipe

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["ExchangeBy", "exchange_by", "key_list", "check_columns", "check_batch", "split_rows"]


def key_list(keys: Union[str, Sequence[str]], operator: str) -> list[str]:
    """``keys`` as a non-empty list of column names; a BuildError naming the operator otherwise.

    >>> key_list("user", "ExchangeBy"), key_list(["a", "b"], "ExchangeBy")
    (['user'], ['a', 'b'])
    """
    names = [keys] if isinstance(keys, str) else list(keys)
    if not names or not all(isinstance(k, str) for k in names):
        raise BuildError(f"operator {operator!r}: keys must be a column name or a list of them, got {keys!r}")
    return names


def check_batch(record: Any, operator: str) -> pa.RecordBatch:
    """``record`` if it is a RecordBatch; a TypeError naming the operator otherwise.

    >>> check_batch([1], "Select")
    Traceback (most recent call last):
    TypeError: operator 'Select' is columnar: its records must be pyarrow.RecordBatch, got list (use \
from_records(schema) to convert a row stream)
    """
    if not isinstance(record, pa.RecordBatch):
        raise TypeError(f"operator {operator!r} is columnar: its records must be pyarrow.RecordBatch, "
                        f"got {type(record).__name__} (use from_records(schema) to convert a row stream)")
    return record


def check_columns(batch: pa.RecordBatch, columns: Sequence[str], operator: str) -> None:
    """A KeyError naming the operator and the column if ``batch`` lacks one of ``columns``.

    >>> import pyarrow as pa
    >>> check_columns(pa.record_batch({"x": [1]}), ["y"], "ExchangeBy")
    Traceback (most recent call last):
    KeyError: "operator 'ExchangeBy': no column 'y' in the batch (columns: x)"
    """
    names = batch.schema.names
    for c in columns:
        if c not in names:
            raise KeyError(f"operator {operator!r}: no column {c!r} in the batch (columns: {', '.join(names)})")


class ExchangeBy:
    """The pact that routes each row of record batches to the worker its keys hash to
    (``stream.exchange_by(keys)`` uses it).

    >>> import pyarrow as pa, timely_spark as ts
    >>> table = pa.table({"k": ["a", "e", "a", "g"]})
    >>> def work(w):
    ...     rows = []
    ...     w.dataflow(lambda s: s.to_stream(table if w.index == 0 else [])
    ...                .exchange_by("k").inspect(lambda rb: rows.extend(rb["k"].to_pylist())))
    ...     return rows
    >>> [sorted(set(rows)) for rows in ts.execute(work, threads=2)]     # each key on one worker
    [['a'], ['e', 'g']]
    """

    def __init__(self, keys: Sequence[str], operator: str) -> None:
        self.keys = list(keys)
        self.operator = operator

    def columns(self, batch: pa.RecordBatch) -> list[str]:
        """The columns ``batch`` is routed by: the pact's keys (a subclass may choose per batch).

        >>> import pyarrow as pa
        >>> ExchangeBy(["k"], "ExchangeBy").columns(pa.record_batch({"k": [1], "v": [2]}))
        ['k']
        """
        return self.keys

    def split(self, batch: pa.RecordBatch, peers: int) -> Iterable[tuple[int, pa.RecordBatch]]:
        """``(worker, rows)`` pieces of a non-empty ``batch``, each for the worker its rows
        go to (a subclass may route otherwise).

        >>> import pyarrow as pa
        >>> pieces = ExchangeBy(["k"], "Op").split(pa.record_batch({"k": ["e", "a", "e"]}), 2)
        >>> [(w, rows.num_rows) for w, rows in pieces]
        [(0, 1), (1, 2)]
        """
        keys = self.columns(batch)
        check_columns(batch, keys, self.operator)
        if peers == 1:
            return [(0, batch)]
        return split_rows(batch, destinations(batch, keys, peers), peers)

    def tee_pusher(self, pushers: Sequence[Any], index: int) -> Callable[[Any, list], None]:
        """One pusher for the producing output: splits every batch by destination.

        >>> import pyarrow as pa
        >>> class Pusher:
        ...     def __init__(self): self.got = []
        ...     def push(self, message): self.got.append([b.num_rows for b in message[1]])
        >>> to = [Pusher(), Pusher()]
        >>> ExchangeBy(["k"], "ExchangeBy").tee_pusher(to, 0)(0, [pa.record_batch({"k": ["e", "a", "e"]})])
        >>> [p.got for p in to]                   # one batch per worker: 'a' to worker 0, both 'e' rows to 1
        [[[1]], [[2]]]
        """
        peers = len(pushers)
        pushes = [p.push for p in pushers]
        operator, split = self.operator, self.split

        def exchange(time: Any, data: list) -> None:
            pieces: list[list] = [[] for _ in range(peers)]
            for record in data:
                batch = check_batch(record, operator)
                if batch.num_rows:
                    for worker, rows in split(batch, peers):
                        pieces[worker].append(rows)
            for push, part in zip(pushes, pieces):
                if part:
                    push((time, part))

        return exchange

    def __repr__(self) -> str:
        return f"ExchangeBy({self.keys!r})"


def split_rows(batch: pa.RecordBatch, dest: np.ndarray, peers: int) -> list[tuple[int, pa.RecordBatch]]:
    """The rows of ``batch`` by their worker ``dest`` (one int in ``0..peers-1`` per row):
    ``(worker, rows)`` for each worker that gets any, in worker order, each worker's
    rows in their order in ``batch``; a batch whose rows all go to one worker is passed
    on whole (no copy).

    >>> import numpy as np, pyarrow as pa
    >>> rb = pa.record_batch({"x": [7, 8, 9]})
    >>> [(w, rows.column("x").to_pylist()) for w, rows in split_rows(rb, np.array([1, 0, 1]), 2)]
    [(0, [8]), (1, [7, 9])]
    """
    counts = np.bincount(dest, minlength=peers)
    if counts.max() == batch.num_rows:                 # all rows go to one worker
        return [(int(dest[0]), batch)]
    ordered = batch.take(pa.array(np.argsort(dest, kind="stable")))
    parts, start = [], 0
    for worker, n in enumerate(counts.tolist()):
        if n:
            parts.append((worker, ordered.slice(start, n)))
            start += n
    return parts


def exchange_by(stream: "Stream", keys: Union[str, Sequence[str]], name: str = "ExchangeBy") -> "Stream":
    """Send each row of this stream's record batches to the worker its keys hash to.

    ``keys`` is a column name or a list of them (integer, string, binary, date and
    timestamp columns); rows with a null key go to a fixed worker.  Every input batch
    becomes at most one batch per destination.  A missing key column raises KeyError,
    a record that is not a RecordBatch TypeError, both naming the operator.

    >>> import pyarrow as pa, timely_spark as ts
    >>> table = pa.table({"user": ["ann", "bob", "ann", "cy"], "clicks": [1, 2, 3, 4]})
    >>> def work(w):
    ...     mine = []
    ...     w.dataflow(lambda s: s.to_stream(table).exchange_by("user").inspect(mine.append))
    ...     while w.step(): pass
    ...     return sorted(u for rb in mine for u in rb.column("user").to_pylist())
    >>> a, b = ts.execute(work, threads=2)
    >>> sorted(a + b) == sorted(["ann", "ann", "bob", "cy"] * 2), set(a) & set(b)
    (True, set())
    """
    return pipe(stream, name, lambda t, data: data, pact=ExchangeBy(key_list(keys, name), name))
