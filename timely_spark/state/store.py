"""Operator state to files and back: Parquet for a ``pyarrow.Table``, pickle otherwise;
keyed state re-sharded by :data:`~timely_spark.dataflow.state_hook.KEY_HASH` on restore.

Every file is authenticated (an HMAC under the checkpoint key, in the manifest) and its
bytes are checked before they are parsed: nothing is unpickled that a holder of the key
did not write.  An operator that declares Table state (keyed, or with a schema) is
restored only from a Parquet file, never from a pickle."""

from __future__ import annotations

import base64
import os
import pickle
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import pyarrow as pa

from ..dataflow.operator import address_text
from ..dataflow.state_hook import KEY_HASH, KeptState
from ..errors import CheckpointError, RestoreError
from .manifest import file_digest, read_verified

__all__ = ["Saved", "state_key", "save_state", "write_saved", "restore_state", "schema_text", "schema_of"]


def state_key(kept: KeptState) -> str:
    """The manifest's key of an operator's state: ``"<dataflow>/<address>"``.

    >>> state_key(KeptState(0, (1, 3), "Count", print))
    '0/1.3'
    """
    return f"{kept.dataflow}/{address_text(kept.address)}"


def _describe(kept: KeptState) -> str:
    return f"operator {kept.name!r} ({address_text(kept.address)}, dataflow {kept.dataflow})"


@dataclass
class Saved:
    """One operator's saved state on one worker, ready to be written by another thread:
    a Table (``kind="parquet"``) or pickled bytes (``kind="pickle"``)."""

    kept: KeptState
    kind: str
    table: Optional[pa.Table] = None
    data: bytes = b""


def save_state(kept: KeptState, t: Any) -> Saved:
    """Call ``kept.save(t)`` and check what it returned; pickle a non-Table at once (the
    operator may change its objects as soon as the worker steps again)."""
    value = kept.save(t)
    if isinstance(value, pa.RecordBatch):
        value = pa.Table.from_batches([value])
    if kept.keyed:
        if not isinstance(value, pa.Table):
            raise CheckpointError(f"{_describe(kept)} keeps keyed state, so its save({t!r}) must return a "
                                  f"pyarrow.Table with a uint64 column {KEY_HASH!r}; it returned "
                                  f"{type(value).__name__}")
        if KEY_HASH not in value.column_names or value.schema.field(KEY_HASH).type != pa.uint64():
            found = value.schema.field(KEY_HASH).type if KEY_HASH in value.column_names else "no such column"
            raise CheckpointError(f"{_describe(kept)} keeps keyed state: its save({t!r}) Table needs a uint64 "
                                  f"column {KEY_HASH!r} (the key hash its exchange routes by); found: {found}")
    if isinstance(value, pa.Table):
        if kept.schema is not None and not value.schema.equals(kept.schema):
            raise CheckpointError(f"{_describe(kept)}: save({t!r}) returned a Table with schema\n"
                                  f"{value.schema}\nnot the declared\n{kept.schema}")
        return Saved(kept, "parquet", table=value)
    try:
        data = pickle.dumps(value, protocol=5)
    except Exception as exc:
        raise CheckpointError(f"{_describe(kept)}: its state (a {type(value).__name__}) cannot be pickled: "
                              f"{type(exc).__name__}: {exc}") from exc
    return Saved(kept, "pickle", data=data)


def schema_text(schema: pa.Schema) -> str:
    """A schema as base64 of its Arrow IPC form (what a manifest stores)."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def schema_of(text: str) -> pa.Schema:
    """The schema :func:`schema_text` stored."""
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


def write_saved(saved: Saved, directory: str, relative: str, worker: int, key: bytes) -> dict:
    """Write one saved state to ``directory/relative`` (fsync'd) and return its
    manifest entry: worker, path, size, mac (its HMAC under ``key``), rows, schema (Tables); CheckpointError
    naming the operator and the file if it cannot be written (a Table Parquet cannot hold)."""
    import pyarrow.parquet as pq  # (not imported with the package: only a run with a checkpoint needs it)

    path = os.path.join(directory, relative)
    try:
        with open(path, "wb") as f:
            if saved.kind == "parquet":
                assert saved.table is not None
                pq.write_table(saved.table, f)
            else:
                f.write(saved.data)
            f.flush()
            os.fsync(f.fileno())
    except Exception as exc:
        raise CheckpointError(f"{_describe(saved.kept)}: its state cannot be written to {path}: "
                              f"{type(exc).__name__}: {exc}") from exc
    size, digest = file_digest(path, key, relative)
    entry = {"worker": worker, "path": relative, "size": size, "mac": digest,
             "rows": saved.table.num_rows if saved.table is not None else None}
    if saved.table is not None:
        entry["schema"] = schema_text(saved.table.schema)
    return entry


_KINDS = ("parquet", "pickle")


def _read(directory: str, entry: dict, kind: str, manifest_path: str, key: bytes) -> Any:
    import pyarrow.parquet as pq

    data = read_verified(directory, entry, manifest_path, key)      # authenticated before it is parsed
    path = os.path.join(directory, entry["path"])
    try:
        if kind == "parquet":
            return pq.read_table(pa.BufferReader(data))
        return pickle.loads(data)
    except Exception as exc:
        raise CheckpointError(f"{path}: cannot read the state file ({type(exc).__name__}: {exc})") from exc


def restore_state(kept: KeptState, state: dict, directory: str, manifest_path: str, index: int, peers: int,
                  saved_peers: int, key: bytes) -> Any:
    """What the snapshot holds for ``kept`` on worker ``index`` of ``peers``: unkeyed
    state of the same worker; keyed state re-sharded (the rows with ``hash % peers ==
    index`` from every worker's file, or this worker's own file when the worker count
    is unchanged).  Each file's HMAC under ``key`` is checked before it is parsed, and
    the manifest's ``kind`` must agree with the state's declared form (a Table for keyed
    state or a declared schema)."""
    if bool(state["keyed"]) != kept.keyed:
        raise CheckpointError(f"{manifest_path}: {_describe(kept)} keeps {'keyed' if kept.keyed else 'unkeyed'} "
                              f"state here, {'keyed' if state['keyed'] else 'unkeyed'} state in the snapshot")
    files = sorted(state["files"], key=lambda e: e["worker"])
    kind = state["kind"]
    if kind not in _KINDS or ((kept.keyed or kept.schema is not None) and kind != "parquet"):
        raise CheckpointError(f"{manifest_path}: {_describe(kept)} keeps its state as a pyarrow.Table "
                              f"({'keyed' if kept.keyed else 'with a declared schema'}), but the snapshot holds "
                              f"it as kind {kind!r}: not restored")
    if kept.schema is not None and kind == "parquet" and files:
        stored = schema_of(files[0]["schema"])
        if not stored.equals(kept.schema):
            raise CheckpointError(f"{os.path.join(directory, files[0]['path'])}: {_describe(kept)} declares the "
                                  f"state schema\n{kept.schema}\nbut the snapshot holds\n{stored}")
    if not kept.keyed:
        if saved_peers != peers:
            raise RestoreError(f"{_describe(kept)} keeps unkeyed state, which restores only into the same "
                               f"worker count: the snapshot ({manifest_path}) has {saved_peers} workers, "
                               f"this run {peers} (make the state keyed, with a {KEY_HASH!r} column, "
                               f"to re-shard it)")
        return _read(directory, files[index], kind, manifest_path, key)
    if saved_peers == peers:
        return _read(directory, files[index], kind, manifest_path, key)
    tables = []
    for entry in files:
        table = _read(directory, entry, kind, manifest_path, key)
        hashes = table.column(KEY_HASH).to_numpy(zero_copy_only=False)
        mask = (hashes % np.uint64(peers)) == np.uint64(index)
        tables.append(table.filter(pa.array(mask)))
    tables = [t for t in tables if t.num_rows] or tables[:1]     # an empty one may type a column otherwise
    try:
        return pa.concat_tables(tables, promote_options="default")     # a worker may lack a column
    except pa.ArrowInvalid as exc:
        raise CheckpointError(f"{manifest_path}: {_describe(kept)}: the workers' state files have different "
                              f"schemas ({exc})") from exc
