"""Building operators: :class:`OperatorBuilder` and the runtime :class:`OperatorCore`.

Every operator of the engine -- ``map`` as much as a user's ``unary_notify`` --
is an :class:`OperatorCore`: a child of its scope's subgraph with input ports
fed by channels, output ports feeding tees, and a ``logic`` closure that runs
when the operator is activated (new input, a frontier change it observes, an
explicit activation).  Consumed, produced and capability changes accumulate in
its :class:`~timely_spark.progress.SharedProgress`, which the scope pulls after
each run and broadcasts as one atomic progress batch.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..communication.allocator import Inbox
from ..progress import Antichain, MutableAntichain, Operate, SharedProgress, Source, Target, identity
from .capability import Capability
from .channels import Broadcast, as_pact
from .ports import InputPort, OutputPort

__all__ = ["OperatorBuilder", "OperatorCore", "OperatorInfo"]


class OperatorInfo:
    """What an operator's constructor may want to know about it."""

    __slots__ = ("name", "index", "address", "activate", "worker_index", "peers")

    def __init__(self, name: str, index: int, address: tuple, activate: Callable[[], None],
                 worker_index: int, peers: int) -> None:
        self.name = name
        self.index = index
        self.address = address
        self.activate = activate
        self.worker_index = worker_index
        self.peers = peers


class OperatorCore(Operate):
    """A local operator: a child of a subgraph that runs ``logic`` when scheduled."""

    local = True

    def __init__(self, graph: Any, name: str) -> None:
        self.graph = graph
        self.name = name
        self.index = graph.add_child(self)
        self.inputs = 0
        self.outputs = 0
        self.notify = False
        self.initial_capabilities = True
        self.logic: Optional[Callable[[], Any]] = None
        self.summary: list[list[Antichain]] = []
        self.frontiers: list[MutableAntichain] = []
        self.input_ports: list[InputPort] = []
        self.output_ports: list[OutputPort] = []
        self.handles: list[Any] = []     # OutputHandles to flush after each run
        self._issued: list[Any] = []     # InputCapabilities handed out by InputPort.next
        self._running = False
        self._activate_child = graph.activate_child
        self.shared_progress = SharedProgress(0, 0)
        self.id = graph.worker._next_operator_id()
        self.input_channels: list[int] = []

    @property
    def address(self) -> tuple:
        return self.graph.path + (self.index,)

    def activate(self) -> None:
        self._activate_child(self.index)

    def _capability_change(self, t: Any, diff: int) -> None:
        for batch in self.shared_progress.internals:
            batch.update(t, diff)
        if not self._running:
            self._activate_child(self.index)

    def _log_messages(self, logger: Any) -> None:
        sp = self.shared_progress
        for channel, batch in zip(self.input_channels, sp.consumeds):
            n = sum(batch._counts.values())
            if n:
                logger.log("messages", channel=channel, operator=self.id, count=n, start=False)
        for batch in sp.produceds:
            n = sum(batch._counts.values())
            if n:
                logger.log("messages", operator=self.id, count=n, start=True)

    # ---- Operate -------------------------------------------------------------------
    def get_internal_summary(self) -> tuple[list[list[Antichain]], list[list[tuple[Any, int]]]]:
        n = self.graph.peers if self.initial_capabilities else 0
        initial = [[(self.graph.min_time, n)] if n else [] for _ in range(self.outputs)]
        return self.summary, initial

    def schedule(self) -> bool:
        if self.notify:
            for frontier, changes in zip(self.frontiers, self.shared_progress.frontiers):
                if changes._counts:
                    frontier.update_iter(changes.drain())
        self._running = True
        try:
            self.logic()  # type: ignore[misc]   (its return value means nothing)
            for h in self.handles:
                h.flush()
            logger = self.graph.worker._logger
            if logger is not None:
                self._log_messages(logger)
        except BaseException as exc:
            if getattr(exc, "_timely_operator", None) is None:
                try:
                    exc._timely_operator = self.name  # type: ignore[attr-defined]
                except Exception:
                    pass
            raise
        finally:
            self._running = False
            if self._issued:
                for cap in self._issued:
                    cap._valid = False
                self._issued.clear()
        return False


class OperatorBuilder:
    """Declare inputs and outputs, then :meth:`build` with the logic.

    >>> import timely_spark as ts
    >>> def build(scope):
    ...     stream = scope.to_stream([1, 2, 3])
    ...     b = OperatorBuilder(stream.scope, "Triple")
    ...     inp = b.new_input(stream)
    ...     out, tripled = b.new_output()
    ...     def logic():
    ...         for t, data in inp.take():
    ...             out.push(t, [3 * x for x in data])
    ...     b.build(logic, initial_capabilities=False)
    ...     tripled.inspect(print)
    >>> ts.example(build)
    3
    6
    9
    """

    def __init__(self, scope: Any, name: str) -> None:
        self.scope = scope
        self.graph = scope._graph
        self.core = OperatorCore(self.graph, name)
        self._summary_overrides: dict[tuple[int, int], Antichain] = {}

    @property
    def index(self) -> int:
        return self.core.index

    def new_input(self, stream: Any, pact: Any = None) -> InputPort:
        """Connect ``stream`` to a new input port with the given pact."""
        core = self.core
        if stream.scope._graph is not self.graph:
            raise ValueError(
                f"operator {core.name!r}: the input stream belongs to another scope; "
                "use enter() / leave() to move streams between scopes")
        port = core.inputs
        core.inputs += 1
        core.frontiers.append(MutableAntichain())
        core.shared_progress.frontiers.append(_new_batch())
        core.shared_progress.consumeds.append(_new_batch())
        inbox = Inbox(core.activate)
        worker = self.graph.worker
        pushers = worker._allocate(inbox)
        core.input_channels.append(worker._channels - 1)
        if worker._logger is not None:
            source_path = self.graph.path + (stream._source.node,)
            worker._logger.log("channel", channel=worker._channels - 1,
                               source=f"{_fmt(source_path)}:{stream._source.port}",
                               target=f"{_fmt(core.address)}:{port}")
        pact = Broadcast() if stream._broadcast else as_pact(pact)
        stream._tee.append(pact.tee_pusher(pushers, self.graph.worker.index))
        self.graph.add_edge(stream._source, Target(core.index, port))
        ip = InputPort(inbox.queue, core.shared_progress.consumeds[port], core.frontiers[port], core)
        core.input_ports.append(ip)
        return ip

    def new_output(self, broadcast: bool = False) -> tuple[OutputPort, Any]:
        """A new output port and the stream it feeds.  ``broadcast``: every record
        counts once per worker, as the stream will be broadcast."""
        from .stream import Stream

        core = self.core
        port = core.outputs
        core.outputs += 1
        core.shared_progress.internals.append(_new_batch())
        core.shared_progress.produceds.append(_new_batch())
        op = OutputPort(core.shared_progress.produceds[port], self.graph.peers if broadcast else 1)
        core.output_ports.append(op)
        stream = Stream(self.scope, Source(core.index, port), op.tee, broadcast=broadcast)
        return op, stream

    def set_summary(self, input: int, output: int, summaries: Any) -> None:
        """Paths from ``input`` to ``output``: an iterable of summaries (empty: none)."""
        self._summary_overrides[(input, output)] = Antichain(summaries)

    def info(self) -> OperatorInfo:
        core = self.core
        return OperatorInfo(core.name, core.index, core.address, core.activate,
                            self.graph.worker.index, self.graph.peers)

    def initial_capability(self) -> Capability:
        """This worker's initial capability (at the scope's minimum time) for all outputs."""
        return Capability(self.graph.min_time, self.core, counted=False)

    def build(self, logic: Callable[[], Any], notify: bool = False, initial_capabilities: bool = True) -> OperatorCore:
        """Install ``logic`` (called with no arguments whenever the operator runs).

        ``notify``: run on frontier changes and keep ``InputPort.frontier`` up to date.
        ``initial_capabilities``: whether the operator starts holding a capability at the
        minimum time (one per worker); operators that only react to input do not need one.
        """
        core = self.core
        ident = identity(self.graph.min_time)
        core.summary = [
            [self._summary_overrides.get((i, o), Antichain([ident])) for o in range(core.outputs)]
            for i in range(core.inputs)
        ]
        core.notify = notify
        core.initial_capabilities = initial_capabilities and core.outputs > 0
        core.logic = logic
        logger = self.graph.worker._logger
        if logger is not None:
            logger.log("operator", operator=core.id, address=_fmt(core.address), name=core.name)
        return core


def _fmt(path: tuple) -> str:
    return ".".join(str(p) for p in path)


def _new_batch():
    from ..progress import ChangeBatch

    return ChangeBatch()
