"""Workers, scopes, streams, channels, capabilities and operators."""

from .capability import Capability, CapabilitySet, InputCapability
from .channels import Exchange, Pipeline, stable_hash
from .input import InputHandle
from .notificator import Notificator
from .operator import OperatorBuilder, OperatorInfo
from .operators.feedback import LoopHandle
from .operators.generic import source
from .operators.split import BranchOut, OkErrOut
from .ports import InputPort, OutputHandle
from .probe import ProbeHandle
from .scope import Scope
from .stream import Stream
from .vertex import Vertex
from .worker import Worker

__all__ = [
    "BranchOut", "Capability", "CapabilitySet", "Exchange", "InputCapability", "InputHandle", "InputPort",
    "LoopHandle", "Notificator", "OkErrOut", "OperatorBuilder", "OperatorInfo", "OutputHandle", "Pipeline",
    "ProbeHandle", "Scope", "Stream", "Vertex", "Worker", "source", "stable_hash",
]
