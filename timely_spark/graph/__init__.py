"""Graph algorithms built on timely dataflows.

* :func:`connected_components` -- ``(vertex, component)`` of an edge list, the
  component being the smallest vertex id in it; on Spark barrier workers for a Spark
  DataFrame, on local workers for a ``pyarrow.Table`` or pandas DataFrame;
* :func:`label_propagation` -- the same as a building block inside your own dataflow;
* :func:`union_find` -- the plain single-threaded reference.
"""

from .connected_components import connected_components, label_propagation
from .union_find import find_root, union_find

__all__ = ["connected_components", "label_propagation", "find_root", "union_find"]
