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

from . import capture, graph, logging, progress, sync
from ._version import __version__
from .dataflow import (
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
    CycleError,
    OperatorError,
    ParameterError,
    RemoteError,
    RunTimeout,
    TimelyError,
    WorkerError,
    WorkerFailure,
)
from .execute import example, execute, execute_from_args
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
    "BranchOut", "BuildError", "Capability", "CapabilityError", "CapabilitySet", "Config", "CycleError",
    "Exchange", "ExchangeBy", "InputCapability", "InputHandle", "InputPort", "LoopHandle", "Notificator", "OkErrOut",
    "OperatorBuilder", "OperatorError", "OutputHandle", "ParameterError", "Pipeline", "ProbeHandle", "Product",
    "RemoteError",
    "RunTimeout", "Scope", "Stream",
    "TimelyError", "Vertex", "Worker", "WorkerError", "WorkerFailure", "__version__", "capture", "example",
    "execute", "execute_from_args", "graph", "logging", "progress", "source", "stable_hash", "sync",
]
__all__ += ["ChangelogError", "collection"]
__all__ += ["AggregateOverflow"]

# ---- snapshots and recovery (issue 24) ----
from . import state  # noqa: E402
from .dataflow.state_hook import KEY_HASH  # noqa: E402
from .errors import CheckpointError, RestoreError  # noqa: E402

__all__ += ["CheckpointError", "KEY_HASH", "RestoreError", "state"]

# ---- one run path (issue 24): a whole runtime.Config, as execute and execute_from_args build it ----
from .execute import execute_config  # noqa: E402

__all__ += ["execute_config"]
