"""``ts.spark.transform``: a DataFrame in, a timely dataflow in the middle, a DataFrame out.

Built on ``DataFrame.mapInArrow(func, schema, barrier=True)``, so it also works over
Spark Connect.  Each partition of the input is one worker: its Arrow record batches
(or, with ``rows=True``, its rows as dicts) enter the dataflow as an input stream at
time 0; the records of the stream that ``build`` returns leave as the rows of the
result, which must match ``schema``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Optional

import cloudpickle

from ..runtime import new_secret
from .barrier import run_in_barrier_task
from .preflight import check_session

__all__ = ["transform"]


def _arrow_schema(df: Any, schema: Any) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    if not isinstance(schema, StructType):
        schema = df.sparkSession.createDataFrame([], schema).schema
    return schema, to_arrow_schema(schema)


def _to_batches(records: list, arrow_schema: Any, rows: bool) -> Iterator[Any]:
    import pyarrow as pa

    if not records:
        return
    names = arrow_schema.names
    if rows:
        dicts = [r if isinstance(r, dict) else (r.asDict() if hasattr(r, "asDict") else dict(zip(names, r)))
                 for r in records]
        yield pa.RecordBatch.from_pylist(dicts, schema=arrow_schema)
        return
    for rb in records:
        if not isinstance(rb, pa.RecordBatch):
            raise TypeError(f"ts.spark.transform: the output stream must carry pyarrow.RecordBatch records "
                            f"(or pass rows=True), got {type(rb).__name__}")
        if rb.schema.equals(arrow_schema):
            yield rb
        else:
            yield from pa.Table.from_batches([rb]).select(names).cast(arrow_schema).to_batches()


def transform(df: Any, build: Callable[[Any, Any], Any], schema: Any, rows: bool = False,
              timeout: float = 30.0) -> Any:
    """Run ``build(scope, stream) -> stream`` over ``df``, one worker per partition.

    ``stream`` carries the partition's ``pyarrow.RecordBatch`` es (``rows=True``: one
    dict per row); the returned stream's records -- record batches, or (with
    ``rows=True``) dicts, tuples or Rows -- become the result's rows, with ``schema``
    (a StructType or a DDL string).  Lazy, like any DataFrame transformation.

        counts = ts.spark.transform(
            words_df,
            lambda scope, rows: rows.map(lambda r: (r["word"], 1))
                                    .aggregate(lambda w, one, n: (n or 0) + one, lambda w, n: (w, n)),
            "word string, n long", rows=True)
    """
    struct, arrow_schema = _arrow_schema(df, schema)
    try:
        partitions: Optional[int] = df.rdd.getNumPartitions()
    except Exception:  # Spark Connect: no RDDs; Spark checks the slots itself
        partitions = None
    if partitions is not None:
        check_session(df.sparkSession, partitions)
    build_bytes = cloudpickle.dumps(build, protocol=5)
    secret = new_secret()

    def func(batches: Iterator[Any]) -> Iterator[Any]:
        user_build = cloudpickle.loads(build_bytes)

        def work(worker: Any) -> list:
            out: list = []

            def dataflow(scope: Any) -> Any:
                inp, stream = scope.new_input("DataFrame")
                user_build(scope, stream).inspect_batch(lambda t, data: out.extend(data))
                return inp

            inp = worker.dataflow(dataflow)
            for rb in batches:
                if rb.num_rows:
                    inp.send_batch(rb.to_pylist() if rows else [rb])
                    worker.step()
            inp.close()
            return out

        _, records = run_in_barrier_task(work, secret, timeout)
        yield from _to_batches(records, arrow_schema, rows)

    return df.mapInArrow(func, struct, barrier=True)
