"""Looking at a snapshot, for debugging: :func:`read_snapshot`."""

from __future__ import annotations

import os
import pickle
import reprlib
import warnings
from typing import Optional

import pyarrow as pa

from ..errors import CheckpointError
from .manifest import candidates, load_manifest, manifest_path, verify_files
from .store import schema_of

__all__ = ["read_snapshot"]

_SUMMARY = reprlib.Repr()
_SUMMARY.maxstring = 80
_SUMMARY.maxother = 80


def _unpickled(file: str) -> tuple[str, str]:
    """The type name and a short repr of a pickled state file; ``("?", why)`` naming the
    file when it cannot be unpickled here (its class not importable in this session)."""
    try:
        with open(file, "rb") as f:
            value = pickle.loads(f.read())
    except Exception as exc:  # noqa: BLE001 -- shown in the table, not raised: a debugging view
        return "?", f"<cannot unpickle {file}: {type(exc).__name__}: {exc}>"
    return type(value).__name__, _SUMMARY.repr(value)


def _choose(checkpoint: str, seq: Optional[int]) -> tuple[str, dict]:
    if seq is not None:
        path = manifest_path(checkpoint, seq)
        manifest = load_manifest(path)
        verify_files(checkpoint, manifest, path)
        return path, manifest
    problems = []
    for path, found in candidates(checkpoint):
        if isinstance(found, CheckpointError):
            problems.append(str(found))
            continue
        if problems:
            warnings.warn(f"checkpoint {checkpoint}: reading the older snapshot {path}, as newer ones cannot be "
                          f"used: " + "; ".join(problems), RuntimeWarning, stacklevel=3)
        return path, found
    raise CheckpointError(f"checkpoint {checkpoint}: no usable snapshot"
                          + (":\n  " + "\n  ".join(problems) if problems else " (no manifest)"))


def read_snapshot(checkpoint: str, operator: Optional[str] = None, *, seq: Optional[int] = None) -> pa.Table:
    """A committed snapshot of ``checkpoint`` as a ``pyarrow.Table`` (the newest usable
    one, or snapshot number ``seq``).

    Without ``operator``: one row per operator state and worker -- ``seq``, ``time``
    (the snapshot's t), ``peers``, ``dataflow``, ``address``, ``operator`` (its name),
    ``keyed``, ``kind`` (``parquet`` or ``pickle``), ``worker``, ``rows`` (of a
    Table), ``bytes``, ``file`` and ``summary`` (a Table's schema, or the type and a
    short repr of a pickled object).  With ``operator`` (a name, an address such as
    ``"1.3"``, or ``"<dataflow>/<address>"``): that operator's state, every worker's,
    with a leading ``worker`` column -- a Table's rows (keyed ones with their
    ``_key_hash``), or one row per worker with ``type`` and ``repr`` of a pickled one.
    ``pyarrow.Table.to_pandas()`` or ``spark.createDataFrame(table.to_pandas())`` show it.
    Raises CheckpointError when no snapshot is usable (a damaged newest one falls back,
    with a warning) and KeyError for an operator the snapshot does not hold; a pickled
    state that cannot be unpickled here (its class not importable) shows as type ``?``
    with a text naming its file and why.

    >>> import tempfile, timely_spark as ts
    >>> def work(worker):
    ...     def build(scope):                  # a sink keeping the sum of its complete times
    ...         inp, stream = scope.new_input()
    ...         b = ts.OperatorBuilder(scope, "Total")
    ...         port = b.new_input(stream)
    ...         total, pending = [0], {}
    ...         b.keep_state(lambda t: total[0] + sum(sum(v) for s, v in pending.items() if s < t))
    ...         def logic():
    ...             for cap, batch in port:
    ...                 pending.setdefault(cap.time, []).extend(batch)
    ...             for s in [s for s in pending if not port.frontier.less_equal(s)]:
    ...                 total[0] += sum(pending.pop(s))
    ...         b.build(logic, notify=True)
    ...         return inp
    ...     inp = worker.dataflow(build)
    ...     for epoch in range(3):
    ...         inp.send_batch(range(epoch + 1))
    ...         inp.advance_to(epoch + 1)
    >>> checkpoint = tempfile.mkdtemp()
    >>> _ = ts.execute(work, threads=2, checkpoint=checkpoint)     # one snapshot, when the inputs close
    >>> for row in ts.state.read_snapshot(checkpoint).select(["time", "operator", "worker", "summary"]).to_pylist():
    ...     print(row)
    {'time': 3, 'operator': 'Total', 'worker': 0, 'summary': 'int: 4'}
    {'time': 3, 'operator': 'Total', 'worker': 1, 'summary': 'int: 4'}
    >>> ts.state.read_snapshot(checkpoint, "Total").to_pylist()
    [{'worker': 0, 'type': 'int', 'repr': '4'}, {'worker': 1, 'type': 'int', 'repr': '4'}]
    """
    import pyarrow.parquet as pq

    path, manifest = _choose(os.fspath(checkpoint), seq)
    states = manifest["states"]
    if operator is None:
        columns: dict[str, list] = {k: [] for k in ("seq", "time", "peers", "dataflow", "address", "operator",
                                                     "keyed", "kind", "worker", "rows", "bytes", "file", "summary")}
        for key in sorted(states):
            state = states[key]
            for entry in sorted(state["files"], key=lambda e: e["worker"]):
                file = os.path.join(checkpoint, entry["path"])
                if state["kind"] == "parquet":
                    summary = str(schema_of(entry["schema"])).replace("\n", "; ")
                else:
                    summary = ": ".join(_unpickled(file))
                for name, v in (("seq", manifest["seq"]), ("time", manifest["time"]), ("peers", manifest["peers"]),
                                ("dataflow", state["dataflow"]), ("address", state["address"]),
                                ("operator", state["name"]), ("keyed", state["keyed"]), ("kind", state["kind"]),
                                ("worker", entry["worker"]), ("rows", entry["rows"]), ("bytes", entry["size"]),
                                ("file", file), ("summary", summary)):
                    columns[name].append(v)
        types = {"seq": pa.int64(), "time": pa.int64(), "peers": pa.int64(), "dataflow": pa.int64(),
                 "keyed": pa.bool_(), "worker": pa.int64(), "rows": pa.int64(), "bytes": pa.int64()}
        return pa.table({k: pa.array(v, types.get(k, pa.string())) for k, v in columns.items()})
    matches = [k for k, s in states.items() if operator in (k, s["address"], s["name"])]
    if len(matches) != 1:
        known = ", ".join(f"{s['name']} ({k})" for k, s in sorted(states.items()))
        raise KeyError(f"{path}: {'no' if not matches else 'more than one'} operator state matches {operator!r} "
                       f"(the snapshot holds: {known or 'none'})")
    state = states[matches[0]]
    files = sorted(state["files"], key=lambda e: e["worker"])
    if state["kind"] == "parquet":
        tables = []
        for entry in files:
            table = pq.read_table(os.path.join(checkpoint, entry["path"]))
            tables.append(table.add_column(0, "worker", pa.array([entry["worker"]] * table.num_rows, pa.int64())))
        return pa.concat_tables(tables)
    workers, types_, reprs = [], [], []
    for entry in files:
        kind, text = _unpickled(os.path.join(checkpoint, entry["path"]))
        workers.append(entry["worker"])
        types_.append(kind)
        reprs.append(text)
    return pa.table({"worker": pa.array(workers, pa.int64()), "type": types_, "repr": reprs})
