"""timely_spark on Spark: one timely worker per barrier task.

* :func:`run` -- ``run(spark, fn, workers=N)``: ``fn(worker)`` in N barrier tasks;
* :func:`transform` -- a DataFrame through a timely dataflow (``mapInArrow``, barrier);
* :func:`stream` -- a streaming DataFrame through a long-running timely dataflow, a
  streaming DataFrame out (:class:`StreamingPipeline`);
* :func:`get_session` -- a session for jobs, with the package's quiet defaults;
* :func:`quiet` -- a running session's driver logs made as quiet as ``get_session``'s;
* :func:`file_input` -- whether (and how) ``transform``'s barrier tasks read a
  DataFrame's Parquet files themselves, with no shuffle before them;
* :func:`cached_partitions` -- the partitions of the loaded cache a DataFrame reads,
  which ``transform(workers=N)`` reads as it is when there are N of them.

Tasks meet through the driver's rendezvous (:mod:`.rendezvous`); their errors come
back as the package's own exceptions (:mod:`.job_errors`).

This package needs PySpark (the engine does not): without it, importing it (or using
``ts.spark``) raises an ImportError saying ``pip install pyspark``.
"""

try:
    import pyspark  # noqa: F401 -- only to say clearly what is missing
except ImportError as exc:
    raise ImportError("timely_spark.spark needs PySpark, which is not installed here: pip install pyspark "
                      "(the engine -- ts.execute, ts.dataflow -- runs without it)") from exc

from .cached_input import cached_partitions
from .connect import is_connect
from .dataframe import SchemaMismatch, transform
from .datasource import register
from .event_log import event_log_frontier, read_event_log
from .file_input import file_input
from .job_errors import SparkMemoryError
from .pipeline import StreamingPipeline, stream
from .preflight import SparkSetupError, check_session, task_slots
from .quiet import quiet
from .rendezvous import RENDEZVOUS_CONF, RendezvousError
from .runner import SparkJobError, run
from .session import get_session, read_conf
from .sink import close_sink_log

__all__ = [
    # sessions
    "get_session", "is_connect", "quiet", "read_conf", "register",
    # running dataflows on barrier tasks
    "cached_partitions", "check_session", "file_input", "run", "stream", "task_slots", "transform",
    # event logs in Spark
    "close_sink_log", "event_log_frontier", "read_event_log",
    # errors and settings
    "RENDEZVOUS_CONF", "RendezvousError", "SchemaMismatch", "SparkJobError", "SparkMemoryError",
    "SparkSetupError", "StreamingPipeline",
]
