"""Graph algorithms built on timely dataflows.

* :func:`connected_components` -- ``(vertex, component)`` of an edge list, the
  component being the smallest vertex id in it; on Spark barrier workers for a Spark
  DataFrame, on local workers for a ``pyarrow.Table`` or pandas DataFrame;
* :func:`components` -- the incremental stream form: a changelog of edges in (record
  batches ``(src, dst[, diff])``), the changelog ``(vertex, component, diff)`` of the
  result out, per completed time, holding only what changed (:mod:`.incremental_components`);
* :func:`snapshot_components` -- the whole ``(vertex, component)`` result at every time
  (what the batch form runs);
* :func:`label_propagation` -- the same as a building block inside your own dataflow;
* :func:`pagerank` / :func:`pagerank_stream` -- PageRank (``pagerank_reference``: numpy);
  the stream form is incremental: a changelog of edges in, a changelog of ranks out;
* :func:`shortest_paths` / :func:`shortest_paths_stream` -- hop counts or weighted distances
  (the stream form incremental and exact, changelogs in and out);
* :func:`union_find` -- the plain single-threaded reference;
* :func:`random_edges` -- a random edge list on Spark, the same on any partitioning;
* :data:`GRAPH_LOG` -- the logging-registry stream where graph operators report the rows
  they hold per worker and time (:mod:`.contraction`).
"""

from .components_columnar import GraphInputError, forest, snapshot_components
from .connected_components import connected_components, label_propagation
from .incremental_components import components
from .pagerank import pagerank, pagerank_reference, pagerank_stream
from .random_graph import random_edges
from .shortest_paths import dijkstra_reference, shortest_paths, shortest_paths_stream
from .state_log import GRAPH_LOG
from .union_find import find_root, union_find
from .unique import sorted_unique

__all__ = [
    # on a Spark DataFrame, a pyarrow Table or a pandas DataFrame
    "GraphInputError", "connected_components", "pagerank", "random_edges", "shortest_paths",
    # inside your dataflow: stream and incremental forms, building blocks
    "components", "forest", "label_propagation", "pagerank_stream", "shortest_paths_stream", "snapshot_components",
    # references and helpers
    "dijkstra_reference", "find_root", "pagerank_reference", "sorted_unique", "union_find",
    # observability
    "GRAPH_LOG",
]
