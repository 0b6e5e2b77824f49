"""A scope at run time: children, their progress, and its exchange among workers.

A :class:`Subgraph` is both a scope (it owns operators, edges and a
:class:`~timely_spark.progress.Tracker`) and, to its parent, one operator that
implements :class:`~timely_spark.progress.Operate`.  Child 0 stands for the
parent: ``Source(0, i)`` is scope input ``i`` and ``Target(0, o)`` scope output ``o``.

Each run (``schedule``):

1. external frontier changes pushed by the parent enter the tracker at ``Source(0, i)``;
2. progress batches from every worker (this one included) are applied, except that
   statements about child 0 are reported upward instead: ``Source(0, i)`` entries
   as messages consumed at scope input ``i``, ``Target(0, o)`` entries as messages
   produced at scope output ``o``;
3. the tracker propagates; frontier changes go to children that observe frontiers
   (which are activated), and changes at ``Target(0, o)`` become this subgraph's
   internal capability changes at output ``o``.  That frontier reflects only work
   inside the scope: the parent accounts for paths from the scope's inputs to its
   outputs through the scope's summary, and counting the input frontier again as an
   output capability would let a loop around the scope justify itself forever;
4. activated children run in index order; what each consumed, produced and did with
   capabilities is collected -- into one batch for local operators, which is then
   broadcast to all workers (atomic) and applied here, or applied directly for nested
   subgraphs, whose reports are already global;
5. children that this worker's own batch activated (a probe whose frontier it moved)
   run once more in the same run (:data:`RERUNS`), so a time completes in the step
   that completed it, not one worker step later.

Time crosses the boundary through ``to_inner`` / ``to_outer`` (``Product(t, 0)``
and ``.outer`` for loops, the identity for regions).
"""

from __future__ import annotations

import heapq
from time import perf_counter
from typing import Any, Callable, Optional

from ..communication.allocator import Inbox
from ..errors import BuildError
from ..progress import Antichain, Builder, ChangeBatch, Operate, SharedProgress, Source, Target, sort_key

__all__ = ["Subgraph"]

PASSES = 8  # passes over activated children per run (see _run_children)

#: Seconds a single worker's scope keeps passing over its children, instead of PASSES
#: passes, while they activate one another (see _run_children): no peer waits on its
#: progress, so a loop of cheap rounds goes many rounds a run, its progress applied once (a
#: round of one record costs ~2 µs less than at 8 passes a run).  With peers, a run ends
#: after PASSES passes: its progress is what they wait for (in two alternations of
#: bench_incremental.py, most epochs on 2 workers took 7-28 % longer when their runs went on
#: for this long).
PASS_BUDGET = 0.001
RERUNS = 1  # more runs of the children that this run's own progress activated (see _apply_local)


class Subgraph(Operate):
    """A scope at run time (see the module docstring).  ``dataflow_index`` is set on a
    dataflow's top scope: the worker's number for it."""

    local = False
    notify = True

    def __init__(self, worker: Any, parent: Optional["Subgraph"], name: str, min_time: Any,
                 to_inner: Optional[Callable[[Any], Any]] = None,
                 to_outer: Optional[Callable[[Any], Any]] = None,
                 project: Optional[Callable[[Any], Any]] = None,
                 path: tuple = (), dataflow_index: int = -1) -> None:
        self.worker = worker
        self.parent = parent
        self.name = name
        self.min_time = min_time
        self.peers = worker.peers
        self.to_inner = to_inner or _same
        self.to_outer = to_outer or _same
        self._project = project or _same
        self.inputs = 0
        self.outputs = 0
        self.dataflow_index = dataflow_index
        self.index = parent.add_child(self) if parent is not None else 0
        self.path: tuple = path if parent is None else parent.path + (self.index,)
        self.id = worker.next_operator_id()
        if worker.logger is not None:
            worker.logger.log("operator", operator=self.id, address=".".join(map(str, self.path)), name=name)
        self.children: list[Any] = [None]
        self.edges: list[tuple[Source, Target]] = []
        self.loops: list[Any] = []          # feedback handles, checked at build time
        self.finalized = False
        self.ingress: list[ChangeBatch] = []  # per scope input: messages entered here (inner time)
        self.shared_progress = SharedProgress(0, 0)
        # activation
        self._pending: set[int] = set()
        self._heap: list[int] = []
        self._in_pass = False
        self._running = -1
        self._self_active = False
        # progress exchange
        self._progress_inbox = Inbox(self.activate)
        _, self._progress_pushers = worker.allocate_channel(self._progress_inbox)
        self._remote = [p.push for j, p in enumerate(self._progress_pushers) if j != worker.index]
        self._batch: dict[tuple[int, Any], int] = {}   # the children's changes, consolidated
        self._incomplete: set[int] = set()

    # ---- construction ----------------------------------------------------------------
    def add_child(self, child: Any) -> int:
        """Add an operator or nested scope; returns its index here."""
        if self.finalized:
            raise BuildError(f"scope {self.name!r} is already built; add operators inside its build function")
        self.children.append(child)
        return len(self.children) - 1

    def add_edge(self, source: Source, target: Target) -> None:
        """Connect a child's output (or a scope input) to a child's input (or a scope output)."""
        if self.finalized:
            raise BuildError(f"scope {self.name!r} is already built; connect streams inside its build function")
        self.edges.append((source, target))

    def add_loop(self, handle: Any) -> None:
        """Remember a feedback handle, to check at build time that it was connected."""
        self.loops.append(handle)

    def new_scope_input(self) -> int:
        """A new input port of this scope; returns its number."""
        self.inputs += 1
        self.ingress.append(ChangeBatch())
        return self.inputs - 1

    def new_scope_output(self) -> int:
        """A new output port of this scope; returns its number."""
        self.outputs += 1
        return self.outputs - 1

    def count_entered(self, input: int, time: Any, count: int) -> None:
        """``count`` records entered at scope input ``input`` at (inner) ``time``."""
        self.ingress[input].update(time, count)

    def finalize(self) -> None:
        """Compile the scope once its build function has returned."""
        for handle in self.loops:
            if not handle.connected:
                raise BuildError(
                    f"scope {self.name!r}: feedback {handle.name!r} was never connected "
                    "(call stream.connect_loop(handle))")
        self.shared_progress = SharedProgress(self.inputs, self.outputs)
        builder = Builder(self.min_time)
        builder.add_node(0, self.outputs, self.inputs, [[[] for _ in range(self.inputs)] for _ in range(self.outputs)],
                         name=f"{self.name} boundary")
        initial: dict[int, list] = {}
        for i, child in enumerate(self.children[1:], start=1):
            summary, init = child.get_internal_summary()
            builder.add_node(i, child.inputs, child.outputs, summary, name=child.name)
            initial[i] = init
        for s, t in self.edges:
            builder.add_edge(s, t)
        observed = [Target(0, o) for o in range(self.outputs)]
        observed += [Target(i, p) for i, c in enumerate(self.children) if i and c.notify for p in range(c.inputs)]
        self.tracker = tracker = builder.build(observed, scope_boundary=True)   # raises CycleError
        self._compiled = tracker.summaries
        lid = tracker.location_id
        targets_of: dict[Source, list[int]] = {}
        for s, t in self.edges:
            targets_of.setdefault(s, []).append(lid(t))
        # per child: (target id, consumed batch), (source id, internal batch), (target ids, produced batch)
        self._child_ports = [None] + [
            ([(lid(Target(i, p)), c.shared_progress.consumeds[p]) for p in range(c.inputs)],
             [(lid(Source(i, o)), c.shared_progress.internals[o]) for o in range(c.outputs)],
             [(targets_of.get(Source(i, o), []), c.shared_progress.produceds[o]) for o in range(c.outputs)])
            for i, c in enumerate(self.children[1:], start=1)
        ]
        self._input_ids = [lid(Source(0, i)) for i in range(self.inputs)]
        self._input_targets = [targets_of.get(Source(0, i), []) for i in range(self.inputs)]
        self._divert: list[Optional[tuple[int, int]]] = [None] * len(tracker.locations)
        for i in range(self.inputs):
            self._divert[lid(Source(0, i))] = (0, i)
        for o in range(self.outputs):
            self._divert[lid(Target(0, o))] = (1, o)
        self._no_boundary = not self.inputs and not self.outputs
        # a progress batch into the tracker: straight in for a dataflow's top scope (nothing to report upward)
        self._apply_batch = tracker.update_ids if self._no_boundary else self._apply
        self._nested = any(not c.local for c in self.children[1:])   # children that apply to the tracker directly
        for i, init in initial.items():
            for o, updates in enumerate(init):
                sid = self._child_ports[i][1][o][0]  # type: ignore[index]
                for t, n in updates:
                    tracker.update_id(sid, t, n)
        self.finalized = True
        for i in range(1, len(self.children)):
            self.activate_child(i)

    # ---- Operate (as seen by the parent) ----------------------------------------------
    def get_internal_summary(self) -> tuple[list[list[Antichain]], list[list[tuple[Any, int]]]]:
        """The scope's summaries from each input to each output (as its parent sees them) and its initial capabilities.
        """
        summary = []
        for i in range(self.inputs):
            reach = self._compiled[Source(0, i)]
            row = []
            for o in range(self.outputs):
                row.append(Antichain(self._project(s) for s in reach.get(Target(0, o), ())))
            summary.append(row)
        self._propagate()
        initial = [b.drain() for b in self.shared_progress.internals]
        return summary, initial

    def schedule(self) -> bool:
        """One run: take in external and exchanged progress, propagate, run activated children, broadcast this run's
        progress batch; True while incomplete.
        """
        self._self_active = False
        tracker = self.tracker
        for i, changes in enumerate(self.shared_progress.frontiers):
            if changes.unstable_has_updates():
                sid = self._input_ids[i]
                to_inner = self.to_inner
                for t, d in changes.drain():
                    tracker.update_id(sid, to_inner(t), d)
        q = self._progress_inbox.queue       # the exchanged progress batches (this worker's own too)
        if q:
            apply = self._apply_batch
            while q:
                apply(q.popleft())
        pushed = tracker.propagate()         # (_propagate, inline)
        if pushed:
            self._frontiers_moved(pushed)
        if self._pending:
            self._run_children()
            self._apply_local()
            for _ in range(RERUNS):  # children our own progress activated (a probe) run in this run too
                if not self._pending:
                    break
                self._run_children()
                self._apply_local()
        else:
            self._apply_local()      # what entered from the parent (only the parent's children count it)
        if self._nested:
            self._propagate()        # what nested subgraphs applied directly
        # children activated by the last propagation (a final frontier change) must
        # still run: the scope is complete only when nothing is pending either
        return bool(self._incomplete) or bool(self._pending) or tracker.tracking_anything()

    # ---- activation ----------------------------------------------------------------------
    def activate_child(self, i: int) -> None:
        """Schedule child ``i`` (in this pass if its index is higher than the running child's, else in the next)."""
        if self._in_pass and i > self._running >= 0:
            heapq.heappush(self._heap, i)
            return
        self._pending.add(i)
        if not self._self_active:       # (activate, inline: one call less an activation)
            self._self_active = True
            if self.parent is None:
                self.worker.activate_dataflow(self)
            else:
                self.parent.activate_child(self.index)

    def activate(self) -> None:
        """Ask to be scheduled (by the parent scope, or the worker for a top scope)."""
        if self._self_active:
            return
        self._self_active = True
        if self.parent is None:
            self.worker.activate_dataflow(self)
        else:
            self.parent.activate_child(self.index)

    # ---- progress ---------------------------------------------------------------------
    def _apply(self, batch: list) -> None:
        if self._no_boundary:         # a dataflow's top scope: nothing to report upward
            self.tracker.update_ids(batch)
            return
        update = self.tracker.update_id
        divert = self._divert
        for loc, t, d in batch:
            where = divert[loc]
            if where is None:
                update(loc, t, d)
            elif where[0] == 0:   # entered at scope input: consumed there
                self.shared_progress.consumeds[where[1]].update(self.to_outer(t), -d)
            else:                 # sent to scope output: produced there
                self.shared_progress.produceds[where[1]].update(self.to_outer(t), d)

    def _propagate(self) -> None:
        pushed = self.tracker.propagate()
        if pushed:
            self._frontiers_moved(pushed)

    def _frontiers_moved(self, pushed: list) -> None:
        """Hand the tracker's frontier changes to the children (and to this scope's outputs).
        (The hot callers call ``tracker.propagate()`` themselves and this only when it moved
        something: most propagations move nothing, and then cost no frame here.)"""
        children = self.children
        internals = self.shared_progress.internals
        told = 0                 # the child whose changes are being recorded, told once they all are
        for target, t, d in pushed:
            node = target.node
            if node == 0:
                internals[target.port].update(self.to_outer(t), d)
                continue
            if node != told:         # (a target's changes come together: a frontier's move tells its child once)
                if told:
                    self._tell(told)
                told = node
            counts = children[node].shared_progress.frontiers[target.port].counts   # (ChangeBatch.update, inline)
            counts[t] = counts[t] + d if t in counts else d
        if told:
            self._tell(told)

    def _tell(self, index: int) -> None:
        """Tell child ``index`` that its input frontier moved: a local child reacts at
        once, any other is activated."""
        child = self.children[index]
        if child.local:
            child.frontier_changed()
        else:
            self.activate_child(index)

    def _run_children(self) -> None:
        """Run activated children in index order.  A child activated during the pass
        runs in the same pass if its index is higher, else in another pass, up to
        ``PASSES`` passes (a single worker: more, for up to ``PASS_BUDGET`` seconds): work
        circulating in a loop goes several rounds per run, and its progress leaves as one
        consolidated batch (safe: merging one worker's consecutive batches is what an
        observer sees when they arrive together)."""
        children = self.children
        ports = self._child_ports
        self._in_pass = True
        passes = PASSES if self.peers > 1 else 0       # 0: passes while the budget lasts
        until = 0.0 if passes else perf_counter() + PASS_BUDGET
        try:
            while self._pending:
                heap = self._heap = [*self._pending]
                if len(heap) > 1:             # (one child pending, the common case: no sort, no heappop)
                    heap.sort()
                self._pending = set()
                last = -1
                logger = self.worker.logger
                while heap:
                    if len(heap) > 1:
                        i = heapq.heappop(heap)
                    else:
                        i = heap[0]
                        del heap[0]
                    if i == last:
                        continue
                    last = self._running = i
                    child = children[i]
                    if logger is not None:
                        logger.log("schedule", operator=child.id, start=True)
                        busy = child.schedule()
                        logger.log("schedule", operator=child.id, start=False)
                    else:
                        busy = child.schedule()
                    if busy:
                        self._incomplete.add(i)
                    elif self._incomplete:
                        self._incomplete.discard(i)
                    if child.local:
                        # a local child's consumed / internal / produced changes into this run's
                        # batch (inline: one call less a child's run; ``b.counts`` read and taken
                        # here, ChangeBatch.unstable_take without its call: most batches are empty
                        # at most runs; ``in`` and a subscript, not batch.get; keys and a subscript,
                        # not counts.items)
                        consumeds, internals, produceds = ports[i]  # type: ignore[misc]
                        batch = self._batch
                        for tid, b in consumeds:
                            counts = b.counts
                            if counts:
                                b.counts = {}
                                for t in counts:
                                    n = counts[t]
                                    key = (tid, t)
                                    batch[key] = batch[key] - n if key in batch else -n
                        for sid, b in internals:
                            counts = b.counts
                            if counts:
                                b.counts = {}
                                for t in counts:
                                    d = counts[t]
                                    key = (sid, t)
                                    batch[key] = batch[key] + d if key in batch else d
                        for tids, b in produceds:
                            counts = b.counts
                            if counts:
                                b.counts = {}
                                for t in counts:
                                    n = counts[t]
                                    for tid in tids:
                                        key = (tid, t)
                                        batch[key] = batch[key] + n if key in batch else n
                    else:
                        self._collect_nested(i)
                self._running = -1
                if passes:
                    passes -= 1
                    if not passes:
                        break
                elif perf_counter() > until:
                    break
        finally:
            self._in_pass = False
            self._running = -1
            if self._heap:   # an error interrupted the pass: keep the rest for later
                self._pending.update(self._heap)
                self._heap = []

    def _collect_nested(self, i: int) -> None:
        """Apply a nested subgraph's consumed / internal / produced changes straight to the
        tracker: its reports are global already (a local child's go into this run's batch,
        in :meth:`_run_children`)."""
        consumeds, internals, produceds = self._child_ports[i]  # type: ignore[misc]
        updates: list[tuple[int, Any, int]] = []
        for tid, b in consumeds:     # (``b.counts``: empty batches skipped without a call)
            if b.counts:
                updates.extend((tid, t, -n) for t, n in b.drain())
        for sid, b in internals:
            if b.counts:
                updates.extend((sid, t, d) for t, d in b.drain())
        for tids, b in produceds:
            if b.counts:
                for t, n in b.drain():
                    updates.extend((tid, t, n) for tid in tids)
        if updates:
            self._apply(updates)   # (what reaches this scope's outputs is reported upward)

    def _apply_local(self) -> None:
        """Broadcast the batch the children just made (one message per worker, atomic) and
        apply it here at once, propagating it: children that it activates -- a probe whose
        frontier it moved -- then run in the same run of the scope, not one worker step later."""
        batch = self._batch
        if self.inputs:                  # (a dataflow's top scope has none)
            for sid, tids, entered in zip(self._input_ids, self._input_targets, self.ingress):
                if entered.unstable_has_updates():
                    get = batch.get
                    for t, n in entered.drain():
                        batch[(sid, t)] = get((sid, t), 0) - n
                        for tid in tids:
                            batch[(tid, t)] = get((tid, t), 0) + n
        if not batch:
            return
        self._batch = {}
        message = []                     # (a loop, not a comprehension: one frame less a run)
        for key in batch:
            d = batch[key]
            if d:
                message.append((key[0], key[1], d))
        if not message:
            return
        if self.worker.logger is not None:
            self.worker.logger.log("progress", address=".".join(map(str, self.path)), count=len(message))
        for push in self._remote:
            push(message)
        self._apply_batch(message)
        pushed = self.tracker.propagate()    # (_propagate, inline)
        if pushed:
            self._frontiers_moved(pushed)

    # ---- introspection -------------------------------------------------------------------
    def frontier(self, target: Target) -> Antichain:
        """The frontier at ``target`` (a child's input, or ``Target(0, o)``)."""
        return self.tracker.frontier(target)

    def held_times(self) -> list:
        """The earliest times at which this scope's children still hold capabilities
        or have messages in flight, sorted (empty once the scope is complete)."""
        return sorted(self.tracker.pointstamp_times(), key=sort_key)


def _same(x: Any) -> Any:
    return x
