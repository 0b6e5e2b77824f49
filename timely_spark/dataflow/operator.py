"""Building operators: the public :class:`OperatorBuilder` and the run-time :class:`OperatorCore`.

Every operator of the engine -- ``map`` as much as a user's two-output loop
operator -- is built with an :class:`OperatorBuilder`: declare inputs (each fed by a
stream through a pact) and outputs (each a checked :class:`~.ports.OutputHandle` and
the stream it feeds), then ``build(logic)``.  At run time the operator is an
:class:`OperatorCore`, a child of its scope that runs ``logic()`` when activated
(new input, a frontier change it observes, an explicit activation).  Consumed,
produced and capability changes accumulate in its
:class:`~timely_spark.progress.SharedProgress`, which the scope collects after each
run and broadcasts as one atomic progress batch.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Optional, Union

from ..communication.allocator import Inbox
from ..errors import BuildError, OperatorError
from ..progress import Antichain, ChangeBatch, MutableAntichain, Operate, SharedProgress, Source, Target, identity
from .capability import Capability
from .channels import PASS_THROUGH, Broadcast, Pipeline, as_pact
from .ports import InputPort, OutputHandle, OutputPort

__all__ = ["OperatorBuilder", "OperatorCore", "OperatorInfo", "address_text"]


def _charged_to(operator: str, tee: Callable[[Any, list], None]) -> Callable[[Any, list], None]:
    """The pusher ``tee``, its errors raised as OperatorError naming ``operator``.

    A pact routes records on the sending side -- inside whichever operator (or input)
    gives them -- but its checks and key functions belong to the receiving operator:
    a group_by's missing key column is the Aggregate's error, not its producer's."""
    def push(time: Any, data: list) -> None:
        try:
            tee(time, data)
        except PASS_THROUGH:
            raise
        except Exception as exc:
            raise OperatorError(operator, exc) from exc

    return push


def address_text(path: tuple) -> str:
    """An operator or scope address as text: ``(0, 3, 1)`` -> ``"0.3.1"``."""
    return ".".join(str(p) for p in path)


class OperatorInfo:
    """What an operator's constructor may want to know about it: ``name``, ``index``
    (in its scope), ``address``, ``activate()`` (ask to be run again),
    ``activate_after(delay)``, ``worker_index`` and ``peers``."""

    __slots__ = ("name", "index", "address", "activate", "worker_index", "peers", "_worker")

    def __init__(self, core: "OperatorCore") -> None:
        graph = core.graph
        self.name = core.name
        self.index = core.index
        self.address = core.address
        self.activate = core.activate
        self.worker_index = graph.worker.index
        self.peers = graph.peers
        self._worker = graph.worker

    def activate_after(self, delay: float) -> None:
        """Run the operator again once ``delay`` seconds have passed (the worker may
        park meanwhile instead of spinning)."""
        self._worker.activate_after(self.activate, delay)


class OperatorCore(Operate):
    """A local operator at run time: a child of a scope that runs ``logic`` when scheduled."""

    local = True

    def __init__(self, graph: Any, name: str) -> None:
        self.graph = graph
        self.name = name
        self.index = graph.add_child(self)
        # ``activate`` below, bound to this operator's index: one call an activation, not two (inputs,
        # sources and an operator's activator call it for every batch they send)
        self.activate = partial(graph.activate_child, self.index)   # type: ignore[method-assign]
        self.inputs = 0
        self.outputs = 0
        self.notify = False
        self.waiting: Optional[Callable[[], bool]] = None   # with notify: whether a frontier change runs it
        self.initial_capabilities = True
        self.logic: Optional[Callable[[], Any]] = None
        self.summary: list[list[Antichain]] = []
        self.frontiers: list[Any] = []          # per input: a MutableAntichain (or a stand-in)
        self.unflushed: list[OutputHandle] = []   # outputs with buffered records
        self.input_channels: list[int] = []
        self.shared_progress = SharedProgress(0, 0)
        self.id = graph.worker.next_operator_id()
        self._worker = graph.worker
        self._running = False
        self._activate_child = graph.activate_child

    @property
    def address(self) -> tuple:
        """The operator's address: its scope's path and its index there."""
        return self.graph.path + (self.index,)

    def activate(self) -> None:
        """Ask to be scheduled."""
        self._activate_child(self.index)

    def frontier_changed(self) -> None:
        """Its input frontiers changed (the changes wait in its ``shared_progress``): schedule
        it -- unless it was built with ``notify=waiting`` and ``waiting()`` is false (it awaits
        no time), then only apply the changes to its frontiers, so they are current when it
        next runs (on input, or an activation)."""
        waiting = self.waiting
        if waiting is None or self._running or waiting():
            self._activate_child(self.index)
            return
        for frontier, changes in zip(self.frontiers, self.shared_progress.frontiers):
            counts = changes.counts
            if counts:              # (ChangeBatch.drain inline: the totals as they are, zeros skipped there)
                changes.counts = {}
                frontier.update_iter(counts.items())

    def capability_change(self, t: Any, diff: int) -> None:
        """Record that a capability at ``t`` was made (+1) or given up (-1) for every
        output (capabilities call this; it activates the operator if it is not running)."""
        if diff:
            for batch in self.shared_progress.internals:   # ChangeBatch.update, inline (one call less an output)
                counts = batch.counts
                counts[t] = counts[t] + diff if t in counts else diff
        if not self._running:
            self._activate_child(self.index)

    def _log_messages(self, logger: Any) -> None:
        sp = self.shared_progress
        for channel, batch in zip(self.input_channels, sp.consumeds):
            n = sum(n for _, n in batch.items())
            if n:
                logger.log("messages", channel=channel, operator=self.id, count=n, start=False)
        for batch in sp.produceds:
            n = sum(n for _, n in batch.items())
            if n:
                logger.log("messages", operator=self.id, count=n, start=True)

    # ---- Operate -------------------------------------------------------------------
    def get_internal_summary(self) -> tuple[list[list[Antichain]], list[list[tuple[Any, int]]]]:
        """The operator's path summaries and, per output, its initial capabilities (one per worker unless built
        without).
        """
        n = self.graph.peers if self.initial_capabilities else 0
        initial = [[(self.graph.min_time, n)] if n else [] for _ in range(self.outputs)]
        return self.summary, initial

    def schedule(self) -> bool:
        """Apply pending frontier changes, run the logic once, flush buffered outputs; an exception becomes
        OperatorError naming the operator.
        """
        if self.notify:
            for frontier, changes in zip(self.frontiers, self.shared_progress.frontiers):
                counts = changes.counts
                if counts:      # (ChangeBatch.drain inline: the totals as they are, zeros skipped there)
                    changes.counts = {}
                    frontier.update_iter(counts.items())
        self._running = True
        try:
            self.logic()  # type: ignore[misc]
            unflushed = self.unflushed
            if unflushed:
                for h in unflushed:
                    h.flush()
                unflushed.clear()
            logger = self._worker.logger
            if logger is not None:
                self._log_messages(logger)
        except PASS_THROUGH:
            raise
        except Exception as exc:
            raise OperatorError(self.name, exc) from exc
        finally:
            self._running = False
        return False


class OperatorBuilder:
    """Declare an operator's inputs and outputs, then :meth:`build` it with its logic.

    * ``new_input(stream, pact)`` -> an :class:`~.ports.InputPort`;
    * ``new_output(name)`` -> ``(OutputHandle, stream)``: checked, buffered sending;
    * ``initial_capability()`` -> this worker's capability at the scope's minimum time;
    * ``info()`` -> name, address, ``activate()``, worker index and peers;
    * ``set_summary(input, output, summaries)`` -> the path summaries (default: identity);
    * ``build(logic, notify=False, initial_capabilities=True)``.

    Any number of inputs and outputs; the logic is called with no arguments and reads
    and writes the ports it closed over.  A two-output operator that routes each
    record by a test:

    >>> import timely_spark as ts
    >>> def build(scope):
    ...     b = OperatorBuilder(scope, "Sign")
    ...     inp = b.new_input(scope.to_stream([3, -1, 4, -5]))
    ...     pos, positives = b.new_output("positive")
    ...     neg, negatives = b.new_output("negative")
    ...     def logic():
    ...         for cap, batch in inp:
    ...             pos.session(cap).give_batch([x for x in batch if x >= 0])
    ...             neg.session(cap).give_batch([x for x in batch if x < 0])
    ...     b.build(logic, initial_capabilities=False)
    ...     negatives.inspect(print)
    >>> ts.example(build)
    -1
    -5
    """

    def __init__(self, scope: Any, name: str) -> None:
        self.scope = scope
        self.graph = scope.subgraph
        self.core = OperatorCore(self.graph, name)
        self._summary_overrides: dict[tuple[int, int], Antichain] = {}
        self._kept: Any = None

    @property
    def index(self) -> int:
        """The operator's index in its scope."""
        return self.core.index

    def new_input(self, stream: Any, pact: Any = None, frontier: Any = None) -> InputPort:
        """Connect ``stream`` to a new input port through ``pact`` (None: Pipeline; a
        key function: Exchange).  ``frontier``: an object with ``update_iter(changes)`` (``changes``: an
        iterable of ``(time, diff)`` pairs, read once; a diff may be 0)
        that receives the input's frontier changes instead of a new MutableAntichain."""
        core = self.core
        if stream.scope.subgraph is not self.graph:
            raise BuildError(
                f"operator {core.name!r}: the input stream belongs to another scope ({stream.scope.name!r}, "
                f"not {self.scope.name!r}); use enter() / leave() to move streams between scopes")
        pact = Broadcast() if stream.is_broadcast else as_pact(pact)
        port = core.inputs
        core.inputs += 1
        core.frontiers.append(MutableAntichain() if frontier is None else frontier)
        core.shared_progress.frontiers.append(ChangeBatch())
        core.shared_progress.consumeds.append(ChangeBatch())
        inbox = Inbox(partial(self.graph.activate_child, core.index))   # core.activate, one call less
        worker = self.graph.worker
        channel, pushers = worker.allocate_channel(inbox)
        core.input_channels.append(channel)
        logger = worker.logger
        if logger is not None:
            logger.log("channel", channel=channel,
                       source=f"{address_text(self.graph.path + (stream.source.node,))}:{stream.source.port}",
                       target=f"{address_text(core.address)}:{port}")
        if pact is Pipeline:
            tee = pact.tee_pusher(pushers, worker.index)
        elif getattr(pact, "charges_errors", False):                    # (no wrapper: one call less a batch)
            tee = pact.tee_pusher(pushers, worker.index, charged_to=core.name)
        else:
            tee = _charged_to(core.name, pact.tee_pusher(pushers, worker.index))
        stream.connect(tee)
        self.graph.add_edge(stream.source, Target(core.index, port))
        return InputPort(inbox.queue, core.shared_progress.consumeds[port], core.frontiers[port], core)

    def new_output(self, name: Optional[str] = None, broadcast: bool = False) -> tuple[OutputHandle, Any]:
        """A new output: its :class:`~.ports.OutputHandle` and the stream it feeds.
        ``name`` names it (in pictures of the dataflow).  ``broadcast``: every record
        counts once per worker, as the stream is broadcast."""
        core = self.core
        port = core.outputs
        core.outputs += 1
        core.shared_progress.internals.append(ChangeBatch())
        core.shared_progress.produceds.append(ChangeBatch())
        op = OutputPort(core.shared_progress.produceds[port], self.graph.peers if broadcast else 1)
        handle = OutputHandle(op, core, name)
        stream = self.scope.new_stream(Source(core.index, port), op.tee, is_broadcast=broadcast)
        return handle, stream

    def set_summary(self, input: int, output: int, summaries: Any) -> None:
        """Paths from ``input`` to ``output``: an iterable of summaries (empty: none)."""
        self._summary_overrides[(input, output)] = Antichain(summaries)

    def info(self) -> OperatorInfo:
        """What a constructor may want to know about the operator."""
        return OperatorInfo(self.core)

    def initial_capability(self) -> Capability:
        """This worker's initial capability (at the scope's minimum time) for all
        outputs.  Build with ``initial_capabilities=True`` (the default) to use it."""
        return Capability(self.graph.min_time, self.core, counted=False)

    def keep_state(self, save: Callable[[Any], Any], *, keyed: bool = False, schema: Any = None) -> Any:
        """Declare the operator's state, so that snapshots save it and a restored run
        gets it back; call it while building the operator, at most once.

        ``save(t)`` is called by the engine between operator runs when a snapshot at
        time ``t`` is taken (only when the run has a ``checkpoint``).  At that moment
        every time held in the dataflow (capabilities, messages in flight) is ``>= t``
        and nothing has passed ``t``: every input at a time ``< t`` has been received,
        and no notification for ``t`` or later has been delivered -- but the operator
        may not have run since its frontier reached ``t``.  ``save(t)`` returns the
        state *for the times before t*: everything folded in from inputs at times
        ``< t``, including what the operator holds to send later because of them
        (received input at times ``< t`` not yet processed, records a delay holds for
        times ``>= t`` -- and any it already sent at times ``>= t``, which the
        receivers do not keep); *not* input it holds at times ``>= t`` (the restored
        run sends that again).  An operator that keeps a
        capability at a time before ``t`` until its inputs pass ``t`` keeps the
        snapshot from completing (the worker warns after
        :data:`~timely_spark.state.manager.SNAPSHOT_STALL` seconds, naming it).
        Return a ``pyarrow.Table`` (stored as Parquet) or any picklable object (stored
        pickled; pickled at once, so the operator may change it afterwards).

        ``keyed=True``: ``save`` returns a ``pyarrow.Table`` with a ``uint64`` column
        named :data:`~.state_hook.KEY_HASH` (``"_key_hash"``) holding, per row, the
        hash the operator's exchange routes that row by (worker = hash % peers); a
        restore into M workers gives each worker the rows with ``hash % M == index``,
        so keyed state survives a change of worker count.  Unkeyed state restores only
        into the same worker count (else :class:`~timely_spark.errors.RestoreError`
        naming the operator).  ``schema`` (optional, a ``pyarrow.Schema``): the Table's
        schema, checked against the snapshot on restore.

        Returns None on a fresh start (or without a checkpoint); on a restore, what
        ``save`` returned on this worker (keyed: a Table of this worker's rows,
        possibly empty), so the constructor rebuilds its state right there -- and may
        use its initial capability to re-create capabilities at restored times
        (``initial.delayed(t2)``) before dropping it.

        A count per key and time, emitted when the time completes (so ``save`` holds
        the counts, and the keys of complete times not yet emitted, with their time):

        >>> import pyarrow as pa
        >>> import timely_spark as ts
        >>> from timely_spark.dataflow.state_hook import KEY_HASH
        >>> def running_count(stream):
        ...     b = OperatorBuilder(stream.scope, "RunningCount")
        ...     inp = b.new_input(stream, ts.Exchange(ts.stable_hash))
        ...     out, counted = b.new_output()
        ...     counts, stash = {}, {}                # key -> count; time -> [capability, keys]
        ...     def save(t):
        ...         rows = [(k, n, None) for k, n in counts.items()]
        ...         rows += [(k, 1, s) for s, (_, keys) in stash.items() if s < t for k in keys]
        ...         return pa.table({KEY_HASH: pa.array([ts.stable_hash(r[0]) for r in rows], pa.uint64()),
        ...                          "key": pa.array([r[0] for r in rows], pa.string()),
        ...                          "count": pa.array([r[1] for r in rows], pa.int64()),
        ...                          "time": pa.array([r[2] for r in rows], pa.int64())})
        ...     initial = b.initial_capability()
        ...     restored = b.keep_state(save, keyed=True)      # None: a fresh start
        ...     for k, n, s in (zip(*restored.select(["key", "count", "time"]).to_pydict().values())
        ...                     if restored is not None else ()):
        ...         if s is None:
        ...             counts[k] = n
        ...         else:
        ...             stash.setdefault(s, [initial.delayed(s), []])[1].extend([k] * n)
        ...     initial.drop()
        ...     def logic():
        ...         for cap, batch in inp:
        ...             stash.setdefault(cap.time, [cap.retain(), []])[1].extend(batch)
        ...         for s in sorted(t for t in stash if not inp.frontier.less_equal(t)):
        ...             cap, keys = stash.pop(s)
        ...             for k in keys:
        ...                 counts[k] = counts.get(k, 0) + 1
        ...             out.session(cap).give_batch(sorted((k, counts[k]) for k in set(keys)))
        ...     b.build(logic, notify=True)
        ...     return counted
        >>> _ = ts.example(lambda s: running_count(s.to_stream(["a", "b", "a"])).inspect(print))
        ('a', 2)
        ('b', 1)
        """
        core = self.core
        if self._kept is not None:
            raise BuildError(f"operator {core.name!r} ({address_text(core.address)}) called keep_state twice; "
                             "an operator keeps one state (put everything in one Table or object)")
        if not callable(save):
            raise BuildError(f"operator {core.name!r}: keep_state(save) needs a callable save(t), got {save!r}")
        from .state_hook import KeptState

        graph = self.graph
        top = graph
        while top.parent is not None:
            top = top.parent
        self._kept = KeptState(top.dataflow_index, core.address, core.name, save, bool(keyed), schema)
        return graph.worker.register_state(self._kept)

    def unstable_capability_changes(self, output: int) -> ChangeBatch:
        """The raw counts of capabilities held for ``output``.

        Unstable, for operators that keep capabilities as counts rather than as
        :class:`~.capability.Capability` objects (replay): every update is a progress
        statement, and a wrong one breaks the run's progress tracking."""
        return self.core.shared_progress.internals[output]

    def build(self, logic: Callable[[], Any], notify: Union[bool, Callable[[], bool]] = False,
              initial_capabilities: bool = True) -> None:
        """Install ``logic`` (called with no arguments whenever the operator runs).

        ``notify``: run on frontier changes and keep each ``InputPort.frontier`` up to date;
        a callable instead of True: run on a frontier change only while it returns True (an
        operator that awaits no time -- holds nothing to act on when one completes -- is not
        run for nothing; its frontiers are kept up to date all the same).
        ``initial_capabilities``: whether the operator starts holding a capability at the
        minimum time (one per worker); operators that only react to input do not need one.
        """
        core = self.core
        ident = identity(self.graph.min_time)
        core.summary = [
            [self._summary_overrides.get((i, o), Antichain([ident])) for o in range(core.outputs)]
            for i in range(core.inputs)
        ]
        core.notify = bool(notify)
        core.waiting = notify if callable(notify) else None
        core.initial_capabilities = initial_capabilities and core.outputs > 0
        core.logic = logic
        logger = self.graph.worker.logger
        if logger is not None:
            logger.log("operator", operator=core.id, address=address_text(core.address), name=core.name)
