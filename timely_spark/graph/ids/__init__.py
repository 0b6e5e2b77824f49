"""Vertex ids: the maps between the ids users give and the int64 ids the algorithms run on.

- :mod:`.dense` (batch forms): ids of any Arrow type become dense int64 ids, distributed,
  in two exchanges with the ids' owners, and back (:func:`~.dense.encode_ids`,
  :func:`~.dense.decode_owned`);
- :mod:`.stream` (incremental stream forms): ids of any type become 62 bits of their hash,
  the same whatever the worker count, with a dictionary kept in snapshots to map results
  back (:func:`~.stream.encode_stream_ids`, :func:`~.stream.decode_stream_ids`);
- :mod:`.positions`: on one worker, int64 ids as dense positions ``0..n-1`` that index
  per-vertex arrays (:class:`~.positions.DenseIds`).
"""

from .dense import decode_owned, encode_ids, id_array, min_labels
from .positions import MAX_VERTICES, DenseIds
from .stream import decode_sources, decode_stream_ids, encode_stream_ids, local_sources, smallest_labels

__all__ = ["encode_ids", "decode_owned", "min_labels", "id_array", "encode_stream_ids", "decode_stream_ids",
           "decode_sources", "local_sources", "smallest_labels", "DenseIds", "MAX_VERTICES"]
