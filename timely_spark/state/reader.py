"""Looking at a snapshot, for debugging: :func:`read_snapshot`."""

from __future__ import annotations

import os
import pickletools
import warnings
from typing import Optional, Union

import pyarrow as pa

from ..errors import CheckpointError
from .key import file_key
from .manifest import candidates, load_manifest, manifest_path, read_verified, verify_files
from .store import schema_of

__all__ = ["read_snapshot", "pickle_summary"]

#: Classes and functions a pickle summary names at most.
_NAMES_SHOWN = 8


def pickle_summary(data: bytes) -> str:
    """What a pickle holds, read from its opcodes without running it: its size, and
    the classes and functions it would import (what loading it would call).

    >>> import pickle, collections
    >>> pickle_summary(pickle.dumps(4, protocol=5))
    'pickle, 5 bytes'
    >>> pickle_summary(pickle.dumps(collections.Counter(a=1), protocol=5)).split("; ")[1]
    'imports collections.Counter'
    """
    names: list[str] = []
    strings: list[str] = []
    try:
        for op, arg, _ in pickletools.genops(data):
            if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8"):
                strings = (strings + [str(arg)])[-2:]
            elif op.name == "STACK_GLOBAL" and len(strings) == 2:
                names.append(".".join(strings))
            elif op.name in ("GLOBAL", "INST"):
                names.append(str(arg).replace(" ", "."))
    except Exception as exc:  # noqa: BLE001 -- a summary, not a check: say what is wrong
        return f"pickle, {len(data)} bytes; not a valid pickle ({type(exc).__name__}: {exc})"
    shown = sorted(set(names))
    more = f" and {len(shown) - _NAMES_SHOWN} more" if len(shown) > _NAMES_SHOWN else ""
    return f"pickle, {len(data)} bytes" + (f"; imports {', '.join(shown[:_NAMES_SHOWN])}{more}" if shown else "")


def _choose(checkpoint: str, seq: Optional[int], key: bytes) -> tuple[str, dict]:
    if seq is not None:
        path = manifest_path(checkpoint, seq)
        manifest = load_manifest(path, key)
        verify_files(checkpoint, manifest, path, key)
        return path, manifest
    problems = []
    for path, found in candidates(checkpoint, key):
        if isinstance(found, CheckpointError):
            problems.append(str(found))
            continue
        if problems:
            warnings.warn(f"checkpoint {checkpoint}: reading the older snapshot {path}, as newer ones cannot be "
                          f"used: " + "; ".join(problems), RuntimeWarning, stacklevel=3)
        return path, found
    raise CheckpointError(f"checkpoint {checkpoint}: no usable snapshot"
                          + (":\n  " + "\n  ".join(problems) if problems else " (no manifest)"))


def read_snapshot(checkpoint: str, operator: Optional[str] = None, *, seq: Optional[int] = None,
                  key: Union[bytes, str, None] = None) -> pa.Table:
    """A committed snapshot of ``checkpoint`` as a ``pyarrow.Table`` (the newest usable
    one, or snapshot number ``seq``), authenticated under the checkpoint key made from
    ``key`` (None: ``$TIMELY_SPARK_SECRET`` or the user's key file, as the run that wrote
    it; see :mod:`timely_spark.state.key`).  Nothing is ever unpickled here.

    Without ``operator``: one row per operator state and worker -- ``seq``, ``time``
    (the snapshot's t), ``peers``, ``dataflow``, ``address``, ``operator`` (its name),
    ``keyed``, ``kind`` (``parquet`` or ``pickle``), ``worker``, ``rows`` (of a
    Table), ``bytes``, ``file`` and ``summary`` (a Table's schema, or a pickle's size
    and the classes it would import, read without running it).  With ``operator`` (a
    name, an address such as ``"1.3"``, or ``"<dataflow>/<address>"``): that operator's
    state, every worker's, with a leading ``worker`` column -- a Table's rows (keyed
    ones with their ``_key_hash``), or one row per worker with the pickled ``data`` (bytes:
    ``pickle.loads`` them yourself if you trust them) and its ``summary``.
    ``pyarrow.Table.to_pandas()`` or ``spark.createDataFrame(table.to_pandas())`` show it.
    Raises CheckpointError when no snapshot is usable (a damaged or unauthenticated newest
    one falls back, with a warning) and KeyError for an operator the snapshot does not hold.

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
    {'time': 3, 'operator': 'Total', 'worker': 0, 'summary': 'pickle, 5 bytes'}
    {'time': 3, 'operator': 'Total', 'worker': 1, 'summary': 'pickle, 5 bytes'}
    >>> import pickle
    >>> [(row["worker"], pickle.loads(row["data"])) for row in ts.state.read_snapshot(checkpoint, "Total").to_pylist()]
    [(0, 4), (1, 4)]
    """
    import pyarrow.parquet as pq

    checkpoint = os.fspath(checkpoint)
    secret = file_key(key)
    path, manifest = _choose(checkpoint, seq, secret)
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
                    summary = pickle_summary(read_verified(checkpoint, entry, path, secret))
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
            table = pq.read_table(pa.BufferReader(read_verified(checkpoint, entry, path, secret)))
            tables.append(table.add_column(0, "worker", pa.array([entry["worker"]] * table.num_rows, pa.int64())))
        return pa.concat_tables(tables)
    blobs = [read_verified(checkpoint, entry, path, secret) for entry in files]
    return pa.table({"worker": pa.array([e["worker"] for e in files], pa.int64()),
                     "data": pa.array(blobs, pa.binary()), "summary": [pickle_summary(b) for b in blobs]})
