"""Workers, scopes, streams, channels, capabilities and operators.

For operators written on record batches (as ``ts.graph``'s are): ``ExchangeBy(keys)``,
the pact routing rows by the hash of key columns; ``destinations(batch, keys, peers)``,
the worker each row goes to; ``check_batch`` / ``check_columns``, the errors naming
the operator that columnar operators raise for a row record or a missing column;
``DIFF``, ``diffs``, ``with_diffs``, ``without_diffs``: the changelog convention (an
optional integer ``diff`` column), read and written the same way by every operator;
``Trace``: the keyed, time-aware state of the incremental operators (``Arranged``: one
shared by several, ``stream.arrange(keys)``); ``Emit``: what a
``per_time`` logic returns to send at later times and be woken at them."""

from .capability import Capability, CapabilitySet, InputCapability
from .channels import Exchange, Pipeline, stable_hash
from .input import InputHandle
from .notificator import Notificator
from .operator import OperatorBuilder, OperatorInfo
from .operators.arranged import Arranged
from .operators.changelog import DIFF, diffs, with_diffs, without_diffs
from .operators.exchange_by import ExchangeBy, check_batch, check_columns, split_rows
from .operators.feedback import LoopHandle
from .operators.generic import source
from .operators.key_hash import destinations, hash_columns
from .operators.op_state import StateHooks
from .operators.per_time import Emit
from .operators.split import BranchOut, OkErrOut
from .ports import InputPort, OutputHandle
from .probe import ProbeHandle
from .scope import Scope
from .state_hook import KEY_HASH
from .stream import Stream
from .trace import Trace
from .vertex import Vertex
from .worker import Worker

__all__ = [
    # workers, scopes, streams, inputs, probes
    "BranchOut", "InputHandle", "LoopHandle", "OkErrOut", "ProbeHandle", "Scope", "Stream", "Worker",
    # operators of your own: capabilities, ports, pacts, notifications, Naiad's vertex
    "Capability", "CapabilitySet", "Exchange", "InputCapability", "InputPort", "Notificator", "OperatorBuilder",
    "OperatorInfo", "OutputHandle", "Pipeline", "Vertex", "source", "stable_hash",
    # operators on record batches: routing by key columns, checks naming the operator
    "ExchangeBy", "check_batch", "check_columns", "destinations", "hash_columns", "split_rows",
    # the changelog convention
    "DIFF", "diffs", "with_diffs", "without_diffs",
    # operator state in snapshots
    "KEY_HASH", "StateHooks",
    # the keyed, time-aware state of the incremental operators; per_time's later sends and wake-ups
    "Trace", "Emit", "Arranged",
]
