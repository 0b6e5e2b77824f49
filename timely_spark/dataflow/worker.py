"""Worker: one thread of control that builds dataflows and runs them.

Every worker runs the same program and builds the same dataflows in the same
order (channels are numbered in build order, so this is what lines them up).
"""

from __future__ import annotations

import heapq
import time
from typing import Any, Callable, Optional, TypeVar

from ..progress import minimum
from .operator import address_text
from .scope import Scope
from .subgraph import Subgraph

__all__ = ["Worker", "PARK"]

R = TypeVar("R")

#: Seconds an idle worker waits for a message before ``step()`` returns.
PARK = 0.05


class Worker:
    """A timely worker: ``ts.execute`` and the Spark runner make one per worker and
    call your function with it.

    * ``index``, ``peers`` -- this worker's index and the number of workers;
    * ``dataflow(build)`` -- build a dataflow; returns what ``build`` returned;
    * ``step()`` / ``step_while(cond, timeout)`` -- run what is ready;
    * ``drop_dataflow(index)`` -- abandon a dataflow, leaving it incomplete;
    * ``timer`` -- ``time.monotonic()`` when the worker started.

    >>> import timely_spark as ts
    >>> def work(worker):
    ...     inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.probe()))(*s.new_input()))
    ...     inp.advance_to(1)
    ...     worker.step_while(lambda: probe.less_than(1), timeout=10)
    ...     return worker.index, worker.peers, probe.frontier
    >>> ts.execute(work, threads=2)
    [(0, 2, Antichain([1])), (1, 2, Antichain([1]))]
    """

    def __init__(self, allocator: Any, config: Any = None) -> None:
        if config is None:
            from ..runtime import Config

            config = Config()
        self.allocator = allocator
        #: The run's :class:`~timely_spark.runtime.Config` (``Config()`` when none was given).
        self.config = config
        #: None on a fresh start; else the time ``t`` of the snapshot this run restored
        #: (set before the worker function is called): inputs start at ``t``, and records
        #: at times before ``t`` are in the restored state, so do not send them again.
        self.restored_time: Any = None
        self._snapshots: Any = None                    # the state layer's manager, when checkpointing
        self._sources: list[tuple[int, Any]] = []      # (dataflow index, pinnable source)
        self._kept: list[Any] = []                     # KeptState registrations, in build order
        self.index: int = allocator.index
        self.peers: int = allocator.peers
        self.timer = time.monotonic()
        self._channels = 0
        self._dataflows: dict[int, Subgraph] = {}      # installed (incomplete, not dropped), by index
        self._built: list[Subgraph] = []               # every dataflow built here, by index
        self._active: list[Subgraph] = []
        self._inputs: list[tuple[int, Any]] = []       # (dataflow index, input handle)
        #: The tracked inputs holding buffered records (an input names itself here as its buffer
        #: fills), flushed at the next step: a step that has none to flush makes no call for them.
        self.unflushed_inputs: dict[Any, None] = {}
        self._closers: list[Any] = []                  # closed when the worker function returns
        self._timers: list[tuple[float, int, Callable[[], None]]] = []   # (deadline, n, activate)
        self._timer_seq = 0
        self._registry: Any = None
        self.logger: Any = None          # the engine's "timely" event logger, None when nobody listens
        self._operator_ids = 0

    def __repr__(self) -> str:
        return f"Worker({self.index} of {self.peers})"

    # ---- services for the layers above ---------------------------------------------------
    def elapsed(self) -> float:
        """Seconds since the worker started.

        >>> import timely_spark as ts
        >>> ts.execute(lambda w: 0 <= w.elapsed() < 60)
        [True]
        """
        return time.monotonic() - self.timer

    def log_register(self) -> Any:
        """This worker's logging registry (see :mod:`timely_spark.logging`).

        >>> import timely_spark as ts
        >>> def work(worker):
        ...     events = []
        ...     worker.log_register().insert("timely", events.extend)
        ...     worker.dataflow(lambda s: s.to_stream([1]).map(str))
        ...     return events
        >>> sorted({e["name"] for e in ts.execute(work)[0] if e["event"] == "operator"})
        ['Dataflow0', 'Map', 'ToStream']
        """
        if self._registry is None:
            from ..logging import Registry

            self._registry = Registry(self)
        return self._registry

    def set_logger(self, logger: Any) -> None:
        """Install (or, with None, remove) the engine's event logger, ``worker.logger``
        (the logging registry does).

        >>> import timely_spark as ts
        >>> ts.execute(lambda w: (w.set_logger(None), w.logger)[1])
        [None]
        """
        self.logger = logger

    def next_operator_id(self) -> int:
        """A new operator id, unique on this worker (operators and scopes take one).

        >>> import timely_spark as ts
        >>> ts.execute(lambda w: (lambda a, b: b == a + 1)(w.next_operator_id(), w.next_operator_id()))
        [True]
        """
        self._operator_ids += 1
        return self._operator_ids - 1

    def allocate_channel(self, inbox: Any) -> tuple[int, list[Any]]:
        """A new channel, numbered in build order: ``(number, pushers)`` with one
        pusher per worker; what the others push to this worker lands in ``inbox``.

        >>> import timely_spark as ts
        >>> from timely_spark.communication.allocator import Inbox
        >>> ts.execute(lambda w: (lambda c: (c[0] >= 0, len(c[1])))(w.allocate_channel(Inbox(lambda: None))), threads=2)
        [(True, 2), (True, 2)]
        """
        channel = self._channels
        self._channels += 1
        return channel, self.allocator.allocate(channel, inbox)

    def on_finish(self, closer: Any) -> None:
        """Call ``closer.close()`` when the worker function returns, before the worker
        runs its dataflows to completion (sequencers use it).

        >>> import timely_spark as ts
        >>> class Note:
        ...     def close(self): print("closed")
        >>> ts.execute(lambda w: w.on_finish(Note()))
        closed
        [None]
        """
        self._closers.append(closer)

    def track_input(self, handle: Any) -> None:
        """Flush ``handle`` at every step that finds it in :attr:`unflushed_inputs` (where it
        names itself while it holds buffered records) and close it when the worker function
        returns (inputs register themselves; dropping their dataflow forgets them).

        >>> import timely_spark as ts
        >>> def work(w):
        ...     inp = w.dataflow(lambda s: s.new_input()[0])      # tracked by new_input
        ...     return inp.closed
        >>> ts.execute(work)
        [False]
        """
        self._inputs.append((len(self._built) - 1, handle))

    # ---- snapshots (the state layer attaches itself; see timely_spark.state) -------------
    def register_source(self, source: Any) -> None:
        """Register a source a snapshot may pin (see
        :class:`~.state_hook.PinnableSource`: ``time``, ``closed``, ``pin(t)``,
        ``unpin()``), for the dataflow being built.  Inputs register themselves;
        capture's followers and replays do too.

        >>> import timely_spark as ts
        >>> def work(w):
        ...     inp = w.dataflow(lambda s: s.new_input()[0])       # registered by new_input
        ...     return [s is inp for s in w.sources()]
        >>> ts.execute(work)
        [[True]]
        """
        self._sources.append((len(self._built) - 1, source))

    def sources(self) -> list:
        """The registered sources (of dataflows not dropped), in registration order.

        >>> import timely_spark as ts
        >>> ts.execute(lambda w: [type(s).__name__ for s in (w.dataflow(lambda s: s.new_input()), w.sources())[1]])
        [['InputHandle']]
        """
        return [s for _, s in self._sources]

    def register_state(self, kept: Any) -> Any:
        """Register an operator's state (``OperatorBuilder.keep_state`` does) and return
        what a restored snapshot holds for it on this worker (None on a fresh start or
        without a checkpoint).

        >>> import timely_spark as ts
        >>> from timely_spark.dataflow.state_hook import KeptState
        >>> ts.execute(lambda w: w.register_state(KeptState(0, (1, 2), "Mine", lambda t: None)))
        [None]
        """
        self._kept.append(kept)
        if self._snapshots is None:
            return None
        return self._snapshots.restored(kept)

    def restored_time_of(self, scope: Any) -> Any:
        """The time the dataflow of ``scope`` (any scope in it) restarts at: the restored
        snapshot's time (:attr:`restored_time`) if the snapshot holds that dataflow, else
        None -- a fresh start, or a dataflow the snapshot does not have (built after it):
        that one starts from the beginning, its sources sending everything again.

        >>> import timely_spark as ts
        >>> ts.execute(lambda w: w.dataflow(lambda s: w.restored_time_of(s)))
        [None]
        """
        if self.restored_time is None or self._snapshots is None:
            return self.restored_time          # (set by hand, without snapshots: every dataflow)
        graph = scope.subgraph
        while graph.parent is not None:
            graph = graph.parent
        return self.restored_time if self._snapshots.holds(graph.dataflow_index) else None

    def kept_states(self) -> list:
        """Every operator state registered on this worker (:class:`~.state_hook.KeptState`).

        >>> import timely_spark as ts
        >>> def work(w):
        ...     def build(scope):
        ...         b = ts.OperatorBuilder(scope, "Keeper")
        ...         b.keep_state(lambda t: {})
        ...         b.build(lambda: None)
        ...     w.dataflow(build)
        ...     return [(k.name, k.keyed) for k in w.kept_states()]
        >>> ts.execute(work)
        [[('Keeper', False)]]
        """
        return list(self._kept)

    def attach_snapshots(self, manager: Any) -> None:
        """Install the state layer's snapshot manager (``timely_spark.state`` does, when
        the run has a checkpoint): ``manager.poll()`` runs at every step, and
        ``manager.busy()`` keeps :meth:`step` reporting work while a snapshot is under
        way; ``manager.built(graph)`` sees each dataflow once it is built;
        ``manager.restored(kept)`` answers :meth:`register_state`; ``manager.holds(index)``
        whether the restored snapshot has dataflow ``index`` (:meth:`restored_time_of`).

        >>> import tempfile, timely_spark as ts
        >>> ts.execute(lambda w: type(w._snapshots).__name__, checkpoint=tempfile.mkdtemp())   # attached for us
        ['SnapshotManager']
        """
        self._snapshots = manager

    def built_dataflows(self) -> list:
        """Every dataflow built on this worker (its top scope), by index (dropped and
        complete ones too).

        >>> import timely_spark as ts
        >>> ts.execute(lambda w: (w.dataflow(lambda s: None, name="Mine"), w.built_dataflows()[0].name)[1])
        ['Mine']
        """
        return list(self._built)

    def dataflow_graphs(self) -> list:
        """A description of every dataflow built on this worker (operators, ports,
        edges, nested scopes), renderable in a notebook (see :mod:`.graph`).

        >>> import timely_spark as ts
        >>> def work(w):
        ...     w.dataflow(lambda s: s.to_stream([1]).map(str))
        ...     return w.dataflow_graphs()[0].operators()
        >>> ts.execute(work)
        [[('0.1', 'ToStream'), ('0.2', 'Map')]]
        """
        from .graph import describe

        return [describe(g) for g in self._built]

    def activate_after(self, activate: Callable[[], None], delay: float) -> None:
        """Call ``activate()`` (an operator's activator) once ``delay`` seconds have passed;
        until then the worker may park instead of spinning.

        >>> import timely_spark as ts
        >>> def work(w):
        ...     fired = []
        ...     w.activate_after(lambda: fired.append(True), 0.01)
        ...     w.step_while(lambda: not fired, timeout=10)
        ...     return fired
        >>> ts.execute(work)
        [[True]]
        """
        self._timer_seq += 1
        heapq.heappush(self._timers, (time.monotonic() + delay, self._timer_seq, activate))

    def activate_dataflow(self, graph: Subgraph) -> None:
        """Schedule a dataflow's top scope at the next step (its scope calls this).

        >>> import timely_spark as ts
        >>> def work(w):
        ...     scopes = []
        ...     w.dataflow(lambda s: scopes.append(s.subgraph))      # an empty dataflow
        ...     w.activate_dataflow(scopes[0])      # what a scope does when an operator in it is activated
        ...     w.step()                            # it runs, and is complete
        ...     return w.installed_dataflows()
        >>> ts.execute(work)
        [[]]
        """
        self._active.append(graph)

    # ---- dataflows -----------------------------------------------------------------------
    def dataflow(self, build: Callable[[Scope], R], time: Any = 0, name: Optional[str] = None) -> R:
        """Build a dataflow whose top-scope times are like ``time`` (an int by default;
        a tuple, or ``()`` for a dataflow with a single time) and return ``build``'s result.

        >>> import timely_spark as ts
        >>> ts.execute(lambda w: w.dataflow(lambda s: s.minimum, time=(0, 0)))
        [(0, 0)]
        """
        number = len(self._built)
        graph = Subgraph(self, None, name or f"Dataflow{number}", minimum(time), path=(self._channels,),
                         dataflow_index=number)
        self._built.append(graph)
        result = build(Scope(graph))
        graph.finalize()
        if self._snapshots is not None:
            self._snapshots.built(graph)
        self._dataflows[number] = graph
        graph.activate()             # run at least once: an empty dataflow completes at once
        return result

    def next_dataflow_index(self) -> int:
        """The index the next dataflow built here will have.

        >>> import timely_spark as ts
        >>> ts.execute(lambda w: (w.next_dataflow_index(), w.dataflow(lambda s: None), w.next_dataflow_index()))
        [(0, None, 1)]
        """
        return len(self._built)

    def installed_dataflows(self) -> list[int]:
        """Indices of the dataflows still running (not complete, not dropped).

        >>> import timely_spark as ts
        >>> def work(w):
        ...     w.dataflow(lambda s: s.to_stream([1]))
        ...     before = w.installed_dataflows()
        ...     while w.step():
        ...         pass
        ...     return before, w.installed_dataflows()
        >>> ts.execute(work)
        [([0], [])]
        """
        return sorted(self._dataflows)

    def drop_dataflow(self, index: int) -> None:
        """Abandon dataflow ``index``: it is never scheduled again and its inputs are
        not closed, so what it held stays incomplete (a capture of it shows its last
        time still open).  Do it on every worker.

        >>> import timely_spark as ts
        >>> def work(worker):
        ...     index = worker.next_dataflow_index()
        ...     inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.probe()))(*s.new_input()))
        ...     worker.drop_dataflow(index)
        ...     return worker.installed_dataflows(), probe.done()
        >>> ts.execute(work)
        [([], False)]
        """
        if not 0 <= index < len(self._built):
            raise ValueError(f"worker {self.index}: no dataflow {index} (built: {len(self._built)})")
        self._dataflows.pop(index, None)
        for d, h in self._inputs:
            if d == index:
                self.unflushed_inputs.pop(h, None)
        self._inputs = [(d, h) for d, h in self._inputs if d != index]
        self._sources = [(d, s) for d, s in self._sources if d != index]

    def incomplete_dataflows(self) -> list[str]:
        """The installed dataflows, by name, each with the times its operators still
        hold (what a run that does not end is waiting for).

        >>> import timely_spark as ts
        >>> def work(w):
        ...     w.dataflow(lambda s: s.new_input(), name="Clicks")
        ...     w.step()
        ...     return w.incomplete_dataflows()
        >>> ts.execute(work)
        [['Clicks (holding [0])']]
        """
        return [f"{g.name} (holding {g.held_times()})" for g in self._dataflows.values()]

    # ---- running --------------------------------------------------------------------
    def step(self) -> bool:
        """Run every activated operator once; if nothing was ready, wait up to a short
        while for a message first.  Returns whether some dataflow is incomplete.

        >>> import timely_spark as ts
        >>> def work(worker):
        ...     worker.dataflow(lambda s: s.to_stream([1, 2]).inspect(print))
        ...     while worker.step():
        ...         pass
        ...     return "complete"
        >>> ts.execute(work)
        1
        2
        ['complete']
        """
        unflushed = self.unflushed_inputs
        if unflushed:                # (only inputs that hold records: most steps have none)
            handles = [*unflushed]
            unflushed.clear()
            for handle in handles:
                handle.flush()
        allocator = self.allocator
        timers = self._timers
        if timers:
            now = time.monotonic()
            while timers and timers[0][0] <= now:
                heapq.heappop(timers)[2]()
        park = 0.0
        if not self._active and (self._dataflows or (self._snapshots is not None and self._snapshots.busy())):
            park = PARK if not timers else max(0.0, min(PARK, timers[0][0] - time.monotonic()))
        if park:
            allocator.receive(park)    # nothing to run: wait for a message (at once if one is there)
        else:
            allocator.receive()
            if not self._active and not self._dataflows and (self._snapshots is None or not self._snapshots.busy()):
                return False
        if self._active:
            active, self._active = self._active, []
            installed = self._dataflows
            if len(active) > 1:                               # (one dataflow, the common case: no set)
                active = list({id(g): g for g in active}.values())
            for graph in active:
                index = graph.dataflow_index
                if index not in installed:
                    continue                                  # dropped or complete
                if not graph.schedule():
                    del installed[index]
                    if self.logger is not None:
                        self.logger.log("shutdown", address=address_text(graph.path))
            allocator.release()
        if self._registry is not None:
            self._registry.flush()
        if self._snapshots is None:
            return bool(self._dataflows)
        return self._snapshots.poll() or bool(self._dataflows)

    def step_while(self, condition: Callable[[], bool], timeout: Optional[float] = None) -> None:
        """Step while ``condition()`` is true; ``timeout`` (seconds) bounds the wait and
        raises ``TimeoutError`` naming the worker.

        >>> import timely_spark as ts
        >>> def work(worker):
        ...     inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.probe()))(*s.new_input()))
        ...     try:
        ...         worker.step_while(lambda: probe.less_than(1), timeout=0.1)   # nobody advances
        ...     except TimeoutError as e:
        ...         return str(e)
        >>> ts.execute(work)
        ['worker 0: condition still true after 0.1 s']
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while condition():
            self.step()
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"worker {self.index}: condition still true after {timeout} s")

    def finish(self) -> None:
        """What happens when the worker function returns: close what registered with
        :meth:`on_finish` and this worker's inputs, run the dataflows to completion,
        and close the logging registry and the allocator.  ``ts.execute`` calls it.

        >>> import timely_spark as ts
        >>> ts.execute(lambda w: (w.dataflow(lambda s: s.to_stream([1]).inspect(print)), None)[1])
        1
        [None]
        """
        for _, handle in self._inputs:
            handle.close()
        for closer in self._closers:
            closer.close()
        while self.step():
            pass
        if self._registry is not None:
            self._registry.close()
        self.allocator.close()
