"""Configuration and defaults shared by every way of running workers.

Local threads (:func:`timely_spark.execute`), local processes, processes started by
hand (:func:`timely_spark.execute_from_args`) and Spark barrier tasks
(:func:`timely_spark.spark.run`) all take their defaults from here.  Each constant is
documented once, here.
"""

from __future__ import annotations

__all__ = ["DEFAULT_PEER_TIMEOUT", "DEFAULT_CONNECT_TIMEOUT"]

#: Seconds a peer process may stay silent (not even a heartbeat) before the run fails
#: with :class:`~timely_spark.errors.WorkerFailure` naming it (``peer_timeout=``).
DEFAULT_PEER_TIMEOUT = 30.0

#: Seconds to wait at the start of a run for every peer process to connect.
DEFAULT_CONNECT_TIMEOUT = 60.0
