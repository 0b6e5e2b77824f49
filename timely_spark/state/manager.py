"""One worker's side of the snapshot protocol, and restore at the start of a run.

The protocol (worker 0 coordinates, over a control channel every worker allocates
first, before any dataflow):

1. worker 0 decides a snapshot is due (``snapshot_every`` elapsed, or every worker's
   sources are closed) and sends ``pin``;
2. each worker pins each of its open sources where it is (a capability kept at its
   current time, whatever the source does next) and answers with the largest time of
   its open sources and the largest ``resume_time`` of its closed ones;
3. worker 0 takes ``t`` = the largest of all answers and sends ``snap t``; each worker
   moves its pins to ``t``.  Every source location is now held at ``t`` or earlier by
   a pin or by the source itself, and nothing at a time before ``t`` is still to come
   from a closed one.  (When ``t`` and the dataflows built are those of the last
   snapshot this run committed, no time has completed since: the round is cancelled,
   as ``snap`` with no time, and an idle run writes no copies of one snapshot);
4. each worker, once every time held anywhere in its dataflows (capabilities and
   messages in flight, nested scopes included) is ``>= t``, calls every
   ``save(t)`` (between operator runs, on the worker's thread), tells worker 0
   ``saved``, and writes the files on a background thread while its dataflows go on;
5. with every ``saved``, worker 0 sends ``release`` (everyone unpins; after the final
   snapshot, closed inputs also give up the hold they kept at their last time -- see
   ``InputHandle.hold_when_closed`` -- so the final snapshot is a cut like any other:
   no operator sees the end of its input, nor a delay releases records for later
   times, before it saves); with every
   ``written`` (files, sizes, checksums), worker 0 commits the manifest (temp file,
   fsync, rename) and deletes snapshots older than the last ``snapshots_kept``.  The
   manifest lists the dataflows the workers had built when they saved (a dataflow built
   later is not in the snapshot; one some workers built before saving and others after
   makes the snapshot not committed).

No worker waits for another but through progress and these messages, which it
handles at its steps.  Restore: at the start the newest usable committed manifest is
read (a damaged one falls back to the one before, with a warning), ``restored_time``
is its ``t``, and ``keep_state`` returns the saved state.
"""

from __future__ import annotations

import datetime
import os
import threading
import time
import warnings
from typing import Any, Callable, Optional

from ..communication.allocator import WAKE, Inbox
from ..dataflow.operator import address_text
from ..dataflow.subgraph import Subgraph
from ..errors import CheckpointError
from ..progress import Source, Target
from .key import file_key
from .manifest import candidates, list_manifests, list_snapshot_dirs, retain, snapshot_dir, write_manifest
from .store import Saved, restore_state, save_state, state_key, write_saved

__all__ = ["SnapshotManager", "attach", "operators_of"]

#: Seconds a worker waits for a snapshot's time to complete before it warns, naming the
#: operator that holds an earlier time (an operator that keeps a capability at a time
#: before ``t`` until its inputs pass ``t`` keeps every snapshot from completing).
SNAPSHOT_STALL = 60.0


#: Passes over the control messages per step (a message this worker sends itself is
#: handled in the same step).
_ROUNDS = 4

#: What the stall warning adds for the final snapshot, which then stops holding the inputs.
_FINAL_FALLBACK = ("; this is the final snapshot: the closed inputs stop holding it, and it is taken once "
                   "the dataflow has drained (not a cut at its time: a run submitted again with more input "
                   "starts from the drained state)")

#: Seconds between a worker's looks at its sources (all closed?) and, on worker 0, at the
#: clock (a snapshot due?) while no snapshot is under way and no message waits.
_QUIET = 0.005


def _nothing() -> None:
    pass


def operators_of(graph: Any) -> list[list[str]]:
    """A dataflow's fingerprint: ``[address, name]`` of every operator and nested scope,
    in build order."""
    out: list[list[str]] = []
    for child in graph.children[1:]:
        if isinstance(child, Subgraph):
            out.append([address_text(child.path), child.name])
            out.extend(operators_of(child))
        else:
            out.append([address_text(child.address), child.name])
    return out


def _held_from(graph: Subgraph, t: Any, outer: Callable[[Any], Any]) -> bool:
    """Whether every time held in ``graph`` (and its nested scopes), seen as a top-level
    time through ``outer``, is ``>= t``."""
    for x in graph.held_times():
        if not t <= outer(x):
            return False
    for child in graph.children[1:]:
        if isinstance(child, Subgraph):
            to_outer = child.to_outer
            if not _held_from(child, t, lambda x, f=to_outer: outer(f(x))):   # type: ignore[misc]
                return False
    return True


def _blocker(graph: Subgraph, t: Any, outer: Callable[[Any], Any]) -> Optional[str]:
    """What in ``graph`` holds a time before ``t``: an operator's capability, or messages in
    flight to one (None if nothing)."""
    tracker = graph.tracker
    for i, child in enumerate(graph.children[1:], start=1):
        where = address_text(child.path if isinstance(child, Subgraph) else child.address)
        for p in range(child.inputs):
            for x, n in tracker.pointstamps(Target(i, p)).items():
                if n > 0 and not t <= outer(x):
                    return f"messages at {x!r} in flight to {child.name!r} ({where})"
        if isinstance(child, Subgraph):
            to_outer = child.to_outer
            found = _blocker(child, t, lambda x, f=to_outer: outer(f(x)))   # type: ignore[misc]
            if found:
                return found
            continue
        for o in range(child.outputs):
            for x, n in tracker.pointstamps(Source(i, o)).items():
                if n > 0 and not t <= outer(x):
                    return f"operator {child.name!r} ({where}) holds a capability at {x!r}"
    return None


class _Part:
    """This worker's part in one snapshot."""

    def __init__(self, seq: int, pinned: list) -> None:
        self.seq = seq
        self.pinned = pinned
        self.t: Any = None
        self.final = False
        self.snapped = False            # got "snap t"
        self.saved = False
        self.released = False
        self.writer: Optional[threading.Thread] = None
        self.result: Any = None         # entries, or the writer's exception
        self.dataflows = 0              # how many dataflows this worker had built when it saved
        self.written = False            # "written" sent
        self.since = time.monotonic()   # when it began waiting for t to complete
        self.warned = False


class _Round:
    """Worker 0's view of one snapshot."""

    def __init__(self, seq: int, final: bool) -> None:
        self.seq = seq
        self.final = final
        self.pinned: dict[int, tuple[Any, Any]] = {}
        self.t: Any = None
        self.snapped = False
        self.saved: set[int] = set()
        self.released = False
        self.written: dict[int, list] = {}


class SnapshotManager:
    """One worker's snapshot manager: restores at the start (see :func:`attach`), then
    runs the protocol at every step of the worker (:meth:`poll`)."""

    def __init__(self, worker: Any) -> None:
        config = worker.config
        self.worker = worker
        self.directory: str = config.checkpoint
        self.every: Optional[float] = config.snapshot_every
        self.keep: int = config.snapshots_kept
        self.key: bytes = file_key(config.checkpoint_key)
        self.index: int = worker.index
        self.peers: int = worker.peers
        self._inbox = Inbox(_nothing)
        _, pushers = worker.allocate_channel(self._inbox)
        self._push = [p.push for p in pushers]
        self._pushed = False
        self._quiet_until = 0.0
        self.manifest: Optional[dict] = None
        self.manifest_path: Optional[str] = None
        self._part: Optional[_Part] = None
        self._closed_reported = False
        self._final_seen = False
        # worker 0's coordination
        self._round: Optional[_Round] = None
        self._closed: set[int] = set()
        self._final_done = False
        self._seq = 0
        self._committed: Optional[tuple[Any, int]] = None   # (t, dataflows) of this run's last commit
        self._due = time.monotonic() + self.every if self.every is not None else None

    # ---- restore ---------------------------------------------------------------------------
    def restore(self) -> None:
        """Find the newest usable committed snapshot and set ``worker.restored_time``;
        a damaged newer one is skipped with a warning naming its file, and when
        manifests exist but none is usable, CheckpointError says why for each."""
        directory = self.directory
        os.makedirs(directory, exist_ok=True)
        problems: list[str] = []
        for path, found in candidates(directory, self.key):
            if isinstance(found, CheckpointError):
                problems.append(str(found))
                continue
            self.manifest, self.manifest_path = found, path
            break
        if self.manifest is None and problems:
            raise CheckpointError(f"checkpoint {directory}: no usable snapshot:\n  " + "\n  ".join(problems))
        if problems and self.index == 0:
            warnings.warn(f"checkpoint {directory}: restoring the older snapshot {self.manifest_path}, as newer "
                          f"ones cannot be used: " + "; ".join(problems), RuntimeWarning, stacklevel=2)
        self._seq = max(list_manifests(directory) + list_snapshot_dirs(directory), default=0)
        if self.manifest is not None:
            self.worker.restored_time = self.manifest["time"]

    def holds(self, dataflow: int) -> bool:
        """Whether the restored snapshot has dataflow number ``dataflow`` (False on a fresh
        start): its sources restart at the snapshot's time, others from the beginning."""
        return self.manifest is not None and str(dataflow) in self.manifest["dataflows"]

    def restored(self, kept: Any) -> Any:
        """What the restored snapshot holds for ``kept`` on this worker (None on a fresh
        start, or for a dataflow the snapshot did not have)."""
        manifest = self.manifest
        if manifest is None or str(kept.dataflow) not in manifest["dataflows"]:
            return None
        built = self.worker.built_dataflows()
        if kept.dataflow < len(built):            # the operators built so far must match the snapshot's
            self._compare(built[kept.dataflow], manifest["dataflows"][str(kept.dataflow)], prefix=True)
        state = manifest["states"].get(state_key(kept))
        if state is None:
            raise CheckpointError(f"{self.manifest_path}: operator {kept.name!r} ({address_text(kept.address)}) of "
                                  f"dataflow {kept.dataflow} keeps state here, but the snapshot holds none for it "
                                  f"(a checkpoint of another dataflow?)")
        if state["name"] != kept.name:
            raise CheckpointError(f"{self.manifest_path}: the operator at {address_text(kept.address)} of dataflow "
                                  f"{kept.dataflow} is {kept.name!r} here but {state['name']!r} in the snapshot "
                                  f"(a checkpoint of another dataflow?)")
        return restore_state(kept, state, self.directory, self.manifest_path or "", self.index, self.peers,
                             manifest["peers"], self.key)

    def built(self, graph: Any) -> None:
        """Check a dataflow once it is built: it can be checkpointed, and a restored
        snapshot's fingerprint of it matches (CheckpointError naming what differs)."""
        where = f"dataflow {graph.name!r} ({graph.dataflow_index})"
        if graph.loops:
            names = ", ".join(repr(getattr(h, "name", "feedback")) for h in graph.loops)
            raise CheckpointError(f"{where} has a feedback edge in its top scope ({names}): the data on it crosses "
                                  f"times that no snapshot holds, so it cannot be checkpointed; put the loop in "
                                  f"an iterative() scope, or run it without checkpoint=")
        if isinstance(graph.min_time, bool) or not isinstance(graph.min_time, int):
            raise CheckpointError(f"{where} has {type(graph.min_time).__name__} times at its top; snapshots "
                                  f"are taken at integer times (build it with the default time=0)")
        for source in self.worker.sources():               # the final snapshot holds closed inputs too
            hold = getattr(source, "hold_when_closed", None)
            if hold is not None:
                hold()
        part = self._part
        if part is not None and not part.released:       # built while a snapshot is under way: hold it too
            for source in self.worker.sources():
                if source.closed or any(source is p for p, _ in part.pinned):
                    continue
                at = part.t if part.snapped and source.time <= part.t else source.time
                source.pin(at)
                part.pinned.append((source, at))
        manifest = self.manifest
        if manifest is None:
            return
        saved = manifest["dataflows"].get(str(graph.dataflow_index))
        if saved is None:
            return
        path = self.manifest_path
        self._compare(graph, saved)
        keeping = {state_key(k) for k in self.worker.kept_states() if k.dataflow == graph.dataflow_index}
        for key, state in manifest["states"].items():
            if state["dataflow"] == graph.dataflow_index and key not in keeping:
                raise CheckpointError(f"{path}: operator {state['name']!r} ({state['address']}) of {where} keeps "
                                      f"state in the snapshot but not here")

    def _compare(self, graph: Any, saved: dict, prefix: bool = False) -> None:
        """CheckpointError naming the first operator of ``graph`` that differs from the
        snapshot's fingerprint ``saved`` (``prefix``: the graph is still being built)."""
        path = self.manifest_path
        where = f"dataflow {graph.name!r} ({graph.dataflow_index})"
        here = operators_of(graph)
        there = saved["operators"]
        for a, b in zip(here, there):
            if list(a) != list(b):
                raise CheckpointError(f"{path}: {where} differs from the snapshot's: operator {a[1]!r} at {a[0]} "
                                      f"here, {b[1]!r} at {b[0]} in the snapshot (a checkpoint of another dataflow?)")
        if len(here) > len(there) or (len(here) < len(there) and not prefix):
            extra = (here if len(here) > len(there) else there)[min(len(here), len(there))]
            raise CheckpointError(f"{path}: {where} differs from the snapshot's: {len(here)} operators here, "
                                  f"{len(there)} in the snapshot (first unmatched: {extra[1]!r} at {extra[0]}; "
                                  f"a checkpoint of another dataflow?)")

    # ---- the protocol ------------------------------------------------------------------------
    def busy(self) -> bool:
        """Whether this worker still has a part in a snapshot: one under way, or the
        final one (all its sources are closed, and that snapshot has not been taken)."""
        if self._part is not None or self._round is not None:
            return True
        return not self._final_seen and self._all_closed()

    def _all_closed(self) -> bool:
        return all(s.closed for s in self.worker.sources())

    def _send(self, to: int, message: tuple) -> None:
        self._push[to](message)
        self._pushed = True

    def _broadcast(self, message: tuple) -> None:
        for to in range(self.peers):
            self._send(to, message)

    def poll(self) -> bool:
        """Handle the protocol's messages and move this worker's part on; True while busy
        (or, between looks, maybe busy)."""
        queue = self._inbox.queue
        if not queue and self._part is None and self._round is None:
            now = time.monotonic()       # between snapshots: look at the sources and the clock now and then
            if now < self._quiet_until:
                return True              # (maybe busy: the worker's idle path asks busy() itself)
            self._quiet_until = now + _QUIET
        for _ in range(_ROUNDS):           # what this worker sent itself is handled at once, not a park later
            while queue:
                self._handle(queue.popleft())
            closed = self._all_closed()
            if closed != self._closed_reported:
                self._closed_reported = closed
                if not closed:
                    self._final_seen = False
                self._send(0, ("closed", self.index, closed))
            if self._part is not None:
                self._advance(self._part)
            if self.index == 0:
                self._coordinate()
            if not queue:
                break
        if self._pushed:
            self._pushed = False
            self.worker.allocator.release()
        return self.busy()

    def _handle(self, message: tuple) -> None:
        kind = message[0]
        part = self._part
        if kind == "pin":
            self._begin(message[1])
        elif kind == "snap":
            _, seq, t, final = message
            assert part is not None and part.seq == seq, (part, message)
            part.t, part.final, part.snapped = t, final, True
            if t is None:                                  # nothing to snapshot: the round is cancelled
                for source, _ in part.pinned:
                    source.unpin()
                self._part = None
                self._final_seen = self._final_seen or final
            else:
                for source, at in part.pinned:
                    if at is None or at <= t:              # (one pinned later than t holds nothing before it)
                        source.pin(t)
        elif kind == "release":
            assert part is not None and part.seq == message[1], (part, message)
            for source, _ in part.pinned:
                source.unpin()
            if part.final:                                 # the final snapshot is saved: inputs may end now
                self._release_holds()
            part.released = True
        else:                                              # worker 0's part: the answers
            self._answer(message)

    def _release_holds(self) -> None:
        """Closed inputs give up the hold they keep for the final snapshot."""
        for source in self.worker.sources():
            release = getattr(source, "release_hold", None)
            if release is not None:
                release()

    def _begin(self, seq: int) -> None:
        pinned = []
        opened: Any = None
        resume: Any = None
        for source in self.worker.sources():
            if source.closed:
                r = source.resume_time
                resume = r if resume is None or r > resume else resume
                if getattr(source, "holding", False):      # a closed input that holds: pinned like an open one
                    pinned.append((source, None))
            else:
                now = source.time
                source.pin(now)
                pinned.append((source, now))
                opened = now if opened is None or now > opened else opened
        self._part = _Part(seq, pinned)
        self._send(0, ("pinned", seq, self.index, opened, resume))

    def _complete_before(self, t: Any) -> bool:
        worker = self.worker
        built = worker.built_dataflows()
        return all(_held_from(built[i], t, _identity) for i in worker.installed_dataflows())

    def _advance(self, part: _Part) -> None:
        if not part.snapped:
            return
        if not part.saved:
            if not self._complete_before(part.t):
                if not part.warned and time.monotonic() - part.since > SNAPSHOT_STALL:
                    part.warned = True
                    built = self.worker.built_dataflows()
                    held = [b for i in self.worker.installed_dataflows()
                            for b in [_blocker(built[i], part.t, _identity)] if b]
                    warnings.warn(f"worker {self.index}: the snapshot at time {part.t!r} has waited "
                                  f"{SNAPSHOT_STALL:g} s for the times before it to complete: "
                                  f"{'; '.join(held) or 'nothing held here'} (sources not yet at {part.t!r}, or an "
                                  f"operator holding an earlier time until its inputs pass it)"
                                  f"{_FINAL_FALLBACK if part.final else ''}", RuntimeWarning)
                    if part.final:
                        self._release_holds()
                return
            saves = [save_state(kept, part.t) for kept in self.worker.kept_states()]
            part.dataflows = len(self.worker.built_dataflows())
            part.saved = True
            self._send(0, ("saved", part.seq, self.index))
            part.writer = threading.Thread(target=self._write, args=(part, saves), daemon=True,
                                           name=f"timely-snapshot-{self.index}")
            part.writer.start()
        if not part.written and part.writer is not None and not part.writer.is_alive():
            if isinstance(part.result, BaseException):
                raise part.result
            part.written = True
            self._send(0, ("written", part.seq, self.index, (part.dataflows, part.result)))
        if part.written and part.released:
            self._part = None
            if part.final:
                self._final_seen = True

    def _write(self, part: _Part, saves: list[Saved]) -> None:
        try:
            relative = os.path.join(os.path.basename(snapshot_dir(self.directory, part.seq)), f"worker-{self.index}")
            os.makedirs(os.path.join(self.directory, relative), exist_ok=True)
            entries = []
            for saved in saves:
                kept = saved.kept
                name = f"{kept.dataflow}-{address_text(kept.address)}.{'parquet' if saved.kind == 'parquet' else 'pkl'}"
                entry = write_saved(saved, self.directory, os.path.join(relative, name), self.index, self.key)
                entries.append({"key": state_key(kept), "dataflow": kept.dataflow,
                                "address": address_text(kept.address), "name": kept.name, "keyed": kept.keyed,
                                "kind": saved.kind, "file": entry})
            part.result = entries
        except BaseException as exc:  # noqa: BLE001 -- raised on the worker's thread
            part.result = (exc if isinstance(exc, CheckpointError) else
                           CheckpointError(f"checkpoint {self.directory}: cannot write snapshot {part.seq} on "
                                           f"worker {self.index}: {type(exc).__name__}: {exc}"))
            part.result.__cause__ = exc
        finally:
            self.worker.allocator.mailbox.put(WAKE)         # the worker may be parked: it has news

    # ---- worker 0: coordination --------------------------------------------------------------
    def _answer(self, message: tuple) -> None:
        kind = message[0]
        if kind == "closed":
            _, worker, closed = message
            if closed:
                self._closed.add(worker)
            else:
                self._closed.discard(worker)
                self._final_done = False
            return
        r = self._round
        assert r is not None and r.seq == message[1], (r, message)
        if kind == "pinned":
            r.pinned[message[2]] = (message[3], message[4])
        elif kind == "saved":
            r.saved.add(message[2])
        elif kind == "written":
            r.written[message[2]] = message[3]

    def _coordinate(self) -> None:
        r = self._round
        now = time.monotonic()
        if r is None:
            closed = len(self._closed) == self.peers
            final = closed and not self._final_done
            # after the final snapshot nothing changes, and the other workers may have finished:
            # a periodic one then would wait for them forever
            periodic = not (closed and self._final_done) and self._due is not None and now >= self._due
            if final or periodic:
                self._seq += 1
                self._round = _Round(self._seq, final)
                self._broadcast(("pin", self._seq))
            return
        if not r.snapped and len(r.pinned) == self.peers:
            times = [x for pair in r.pinned.values() for x in pair if x is not None]
            r.t = max(times) if times else None
            if not r.final and self._committed == (r.t, len(self.worker.built_dataflows())):
                r.t = None                 # nothing completed since the last snapshot: it would be the same one
            r.snapped = True
            self._broadcast(("snap", r.seq, r.t, r.final))
            if r.t is None:
                self._finish_round(r, now)
            return
        if r.snapped and not r.released and len(r.saved) == self.peers:
            r.released = True
            self._broadcast(("release", r.seq))
        if len(r.written) == self.peers:
            self._commit(r)
            self._finish_round(r, time.monotonic())

    def _finish_round(self, r: _Round, now: float) -> None:
        self._round = None
        if r.final:
            self._final_done = True
        if self.every is not None:
            self._due = now + self.every

    def _commit(self, r: _Round) -> None:
        counts = {n for n, _ in r.written.values()}
        if len(counts) != 1:
            # a dataflow was built on some workers before they saved and on others after: the
            # snapshot holds its state from some workers only, so it is not committed (the next is)
            return
        [built] = counts
        states: dict[str, dict] = {}
        for worker in sorted(r.written):
            for e in r.written[worker][1]:
                state = states.setdefault(e["key"], {"dataflow": e["dataflow"], "address": e["address"],
                                                     "name": e["name"], "keyed": e["keyed"], "kind": e["kind"],
                                                     "files": []})
                if state["kind"] != e["kind"]:
                    raise CheckpointError(f"operator {e['name']!r} ({e['address']}) saved a "
                                          f"{'Table' if state['kind'] == 'parquet' else 'pickled object'} on one "
                                          f"worker and a {'Table' if e['kind'] == 'parquet' else 'pickled object'} "
                                          f"on worker {worker}; snapshot {r.seq} is not committed")
                state["files"].append(e["file"])
        dataflows = {str(g.dataflow_index): {"name": g.name, "operators": operators_of(g)}
                     for g in self.worker.built_dataflows()[:built]}      # those built when the workers saved
        body = {"time": r.t, "peers": self.peers, "final": r.final, "dataflows": dataflows, "states": states,
                "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        write_manifest(self.directory, r.seq, body, self.key)
        self._committed = (r.t, built)
        retain(self.directory, self.keep, protect=self.manifest["seq"] if self.manifest is not None else None)


def _identity(x: Any) -> Any:
    return x


def attach(worker: Any) -> SnapshotManager:
    """Install snapshots on ``worker`` (its ``config.checkpoint`` is set), before the
    worker function runs: allocate the control channel, restore the newest usable
    committed snapshot (``worker.restored_time``) and hook into the worker's steps.
    Every way of running calls it for every worker.

    >>> import tempfile, timely_spark as ts
    >>> from timely_spark.communication.thread import ThreadAllocator, ThreadFabric
    >>> worker = ts.Worker(ThreadAllocator(0, ThreadFabric(1)), ts.Config(checkpoint=tempfile.mkdtemp()))
    >>> attach(worker).manifest, worker.restored_time          # an empty checkpoint: a fresh start
    (None, None)
    """
    manager = SnapshotManager(worker)
    manager.restore()
    worker.attach_snapshots(manager)
    return manager
