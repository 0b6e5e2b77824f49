"""timely_spark: timely dataflow in Python, run on Spark barrier tasks.

>>> import timely_spark as ts
>>> def work(worker):
...     seen = []
...     def build(scope):
...         inp, stream = scope.new_input()
...         probe = stream.exchange(lambda x: x).inspect(seen.append).probe()
...         return inp, probe
...     inp, probe = worker.dataflow(build)
...     for epoch in range(3):
...         if worker.index == 0:
...             inp.send_batch(range(epoch * 4, epoch * 4 + 4))
...         inp.advance_to(epoch + 1)
...         worker.step_while(lambda: probe.less_than(inp.time), timeout=10)
...     return sorted(seen)
>>> ts.execute(work, threads=2)
[[0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9, 11]]
"""

from typing import TYPE_CHECKING, Any

from . import capture, graph, logging, progress, state, sync
from ._version import __version__
from .dataflow import (
    KEY_HASH,
    BranchOut,
    Capability,
    CapabilitySet,
    Exchange,
    ExchangeBy,
    InputCapability,
    InputHandle,
    InputPort,
    LoopHandle,
    Notificator,
    OkErrOut,
    OperatorBuilder,
    OutputHandle,
    Pipeline,
    ProbeHandle,
    Scope,
    Stream,
    Vertex,
    Worker,
    source,
    stable_hash,
)
from .dataflow.collection import collection
from .errors import (
    AggregateOverflow,
    BuildError,
    CapabilityError,
    ChangelogError,
    CheckpointError,
    CycleError,
    OperatorError,
    ParameterError,
    RemoteError,
    RestoreError,
    RunTimeout,
    TimelyError,
    WorkerError,
    WorkerFailure,
)
from .execute import example, execute, execute_config, execute_from_args
from .progress import Product
from .runtime import Config

if TYPE_CHECKING:
    from . import spark as spark


def __getattr__(name: str) -> Any:
    """``ts.spark``, imported on first use: the engine alone needs no PySpark (and
    ``import timely_spark`` does not pay for importing it)."""
    if name == "spark":
        import importlib

        return importlib.import_module(".spark", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ``spark`` is left out: ``from timely_spark import *`` must work without PySpark
__all__ = [
    # running: on threads, processes and hosts (ts.spark.run on Spark)
    "Config", "Worker", "example", "execute", "execute_config", "execute_from_args",
    # building dataflows: scopes, streams, inputs, probes, times
    "BranchOut", "InputHandle", "LoopHandle", "OkErrOut", "ProbeHandle", "Product", "Scope", "Stream",
    # operators of your own: capabilities, ports, pacts, notifications, Naiad's vertex
    "Capability", "CapabilitySet", "Exchange", "ExchangeBy", "InputCapability", "InputPort", "Notificator",
    "OperatorBuilder", "OutputHandle", "Pipeline", "Vertex", "source", "stable_hash",
    # changelogs and operator state
    "KEY_HASH", "collection",
    # errors (all are TimelyError)
    "AggregateOverflow", "BuildError", "CapabilityError", "ChangelogError", "CheckpointError", "CycleError",
    "OperatorError", "ParameterError", "RemoteError", "RestoreError", "RunTimeout", "TimelyError", "WorkerError",
    "WorkerFailure",
    # sub-packages
    "capture", "graph", "logging", "progress", "state", "sync",
    "__version__",
]
