"""Row-wise columnar operators on streams of Arrow record batches: filter by an
expression, select, with_columns.

Expressions are ``pyarrow.compute`` expressions (``pc.field("x") * 2``), evaluated
by Arrow's engine once per batch; a callable taking the RecordBatch works too.
Each output batch is sent at its input batch's time; empty results are not sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Union

import pyarrow as pa
import pyarrow.compute as pc

from .exchange_by import check_batch
from .pipe import pipe

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["filter_rows", "select", "with_columns", "evaluate"]

Expression = Union[pc.Expression, Callable[[pa.RecordBatch], Any]]


def evaluate(batch: pa.RecordBatch, columns: dict[str, Expression], operator: str) -> pa.RecordBatch:
    """A batch of the named ``columns``, each an expression (or a callable on the batch,
    or a column name) evaluated on ``batch``.  Errors name the operator.

    >>> import pyarrow as pa, pyarrow.compute as pc
    >>> batch = pa.record_batch({"x": [1, 2]})
    >>> evaluate(batch, {"x": "x", "y": pc.field("x") * 10}, "Select").to_pydict()
    {'x': [1, 2], 'y': [10, 20]}
    """
    exprs: dict[str, pc.Expression] = {}
    computed: dict[str, Any] = {}
    for name, e in columns.items():
        if isinstance(e, str):
            e = pc.field(e)
        if isinstance(e, pc.Expression):
            exprs[name] = e
        elif callable(e):
            computed[name] = e(batch)
        else:
            raise TypeError(f"operator {operator!r}: column {name!r} must be a pyarrow.compute expression, "
                            f"a column name or a callable on the batch, not {type(e).__name__}")
    arrays: dict[str, Any] = {}
    if exprs:
        from pyarrow import acero

        try:
            table = acero.Declaration.from_sequence([
                acero.Declaration("table_source", acero.TableSourceNodeOptions(pa.Table.from_batches([batch]))),
                acero.Declaration("project", acero.ProjectNodeOptions(list(exprs.values()), list(exprs))),
            ]).to_table(use_threads=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise ValueError(f"operator {operator!r}: {exc}") from exc
        for name in exprs:
            arrays[name] = table.column(name).combine_chunks()
    return pa.record_batch([arrays[n] if n in arrays else computed[n] for n in columns], names=list(columns))


def filter_rows(stream: "Stream", expression: Expression, name: str = "Filter") -> "Stream":
    """Keep the rows of each record batch for which ``expression`` (a boolean
    ``pyarrow.compute`` expression, or a callable giving a boolean mask) is true.
    ``stream.filter(expression)`` calls this when given an expression.

    >>> import pyarrow as pa, pyarrow.compute as pc, timely_spark as ts
    >>> table = pa.table({"x": [1, 5, 9]})
    >>> _ = ts.example(lambda s: s.to_stream(table).filter(pc.field("x") > 2)
    ...                .inspect(lambda rb: print(rb.column("x").to_pylist())))
    [5, 9]
    """
    def fn(t: Any, data: list) -> list:
        out = []
        for record in data:
            batch = check_batch(record, name)
            mask = expression(batch) if callable(expression) and not isinstance(expression, pc.Expression) \
                else evaluate(batch, {"mask": expression}, name).column(0)
            kept = batch.filter(mask)
            if kept.num_rows:
                out.append(kept)
        return out

    return pipe(stream, name, fn)


def select(stream: "Stream", *columns: str, name: str = "Select", **expressions: Expression) -> "Stream":
    """Each record batch reduced to ``columns`` (names, in this order), followed by
    ``expressions`` (``new_name=expression``).

    >>> import pyarrow as pa, pyarrow.compute as pc, timely_spark as ts
    >>> table = pa.table({"a": [1, 2], "b": ["x", "y"], "c": [0.5, 1.5]})
    >>> _ = ts.example(lambda s: s.to_stream(table).select("b", a2=pc.field("a") * 2)
    ...                .inspect(lambda rb: print(rb.to_pydict())))
    {'b': ['x', 'y'], 'a2': [2, 4]}
    """
    wanted: dict[str, Expression] = {c: c for c in columns}
    wanted.update(expressions)

    def fn(t: Any, data: list) -> list:
        return [evaluate(check_batch(record, name), wanted, name) for record in data]

    return pipe(stream, name, fn)


def with_columns(stream: "Stream", name: str = "WithColumns", **expressions: Expression) -> "Stream":
    """Each record batch with the columns ``new_name=expression`` added (or replaced, in
    place, when the name exists).

    >>> import pyarrow as pa, pyarrow.compute as pc, timely_spark as ts
    >>> table = pa.table({"a": [1, 2]})
    >>> _ = ts.example(lambda s: s.to_stream(table).with_columns(b=pc.field("a") + 10)
    ...                .inspect(lambda rb: print(rb.to_pydict())))
    {'a': [1, 2], 'b': [11, 12]}
    """
    def fn(t: Any, data: list) -> list:
        out = []
        for record in data:
            batch = check_batch(record, name)
            wanted: dict[str, Expression] = {c: c for c in batch.schema.names}
            wanted.update(expressions)
            out.append(evaluate(batch, wanted, name))
        return out

    return pipe(stream, name, fn)
