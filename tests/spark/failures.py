"""The harness of the failure tests: a stateful streaming dataflow fed from a
followed Parquet log, its outputs captured into Parquet logs, run on two processes with
a checkpoint, one worker process SIGKILLed at chosen points, re-run with the same
checkpoint until it completes.

The dataflow (columnar, from the followed input log of ``k``, ``v``, ``src``, ``dst``):

* ``totals`` -- a running ``group_by("k")`` (sum of ``v``, count), a changelog;
* ``pairs`` -- a running join on ``k`` of the input with itself delayed by one epoch;
* ``labels`` -- ``ts.graph`` incremental components of the ``src``/``dst`` edges;

each captured into its own log (``<out>/<name>``).  A pass-through operator with state
(``Tap``, kept through the public ``keep_state`` hook) counts the batches it sees and
carries the kill: ``("batch", worker, n)`` SIGKILLs the worker's process when it has
seen ``n`` batches in this run (``("batch", worker, n, True)``: ``n`` batches since it
first saw a committed snapshot), ``("save", worker, n)`` at its ``n``-th snapshot save
-- in the middle of a snapshot being written.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Optional

import pyarrow as pa

import timely_spark as ts
from timely_spark.capture import ParquetEventWriter, follow
from timely_spark.dataflow.operator import OperatorBuilder
from timely_spark.errors import WorkerFailure
from timely_spark.graph.incremental_components import components

INPUT = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("src", pa.int64()), ("dst", pa.int64())])
OUTPUTS = {
    "totals": pa.schema([("k", pa.int64()), ("v_sum", pa.int64()), ("count_all", pa.int64()), ("diff", pa.int64())]),
    "pairs": pa.schema([("k", pa.int64()), ("v", pa.int64()), ("w", pa.int64()), ("diff", pa.int64())]),
    "labels": pa.schema([("vertex", pa.int64()), ("component", pa.int64()), ("diff", pa.int64())]),
}
ROWS = 6            # input rows per epoch
HOLD_WAIT = 120.0   # seconds the feeder waits for a committed snapshot at most
GATE_WAIT = 3.0     # seconds the feeder waits to be allowed an epoch: an idle run commits no snapshot
KEYS = 3


def epoch_table(e: int) -> pa.Table:
    """The input rows of epoch ``e`` (deterministic)."""
    i = [e * ROWS + j for j in range(ROWS)]
    return pa.table({"k": [x % KEYS for x in i], "v": [x % 7 for x in i],
                     "src": [x % 17 for x in i], "dst": [(3 * x + 1) % 19 + 20 for x in i]}, schema=INPUT)


class InputFeeder(threading.Thread):
    """Writes the input log epoch by epoch (one every ``interval`` seconds), then closes
    it.  ``hold``: ``(epoch, checkpoint)`` -- epoch ``epoch`` and later wait for a
    committed snapshot in ``checkpoint`` (so some input comes after one)."""

    def __init__(self, path: Path, epochs: int, interval: float, hold: Optional[tuple] = None,
                 allowed: Optional[int] = None) -> None:
        super().__init__(daemon=True)
        self.path, self.epochs, self.interval, self.hold = path, epochs, interval, hold
        self.error: Optional[BaseException] = None
        self.allowed = epochs if allowed is None else allowed      # epochs it may write so far (see allow)
        self.gate = threading.Condition()

    def allow(self, epochs: int) -> None:
        """Let the feeder write up to ``epochs`` epochs (past the last allowed it waits up to
        ``GATE_WAIT`` seconds an epoch, so a run left idle without a snapshot goes on)."""
        with self.gate:
            self.allowed = max(self.allowed, epochs)
            self.gate.notify_all()

    def run(self) -> None:
        from timely_spark.capture import Messages, Progress

        try:
            w = ParquetEventWriter(self.path, flush_seconds=0.0, schema=INPUT)
            for e in range(self.epochs):
                if self.hold is not None and e == self.hold[0]:
                    deadline = time.monotonic() + HOLD_WAIT
                    while not committed(self.hold[1]) and time.monotonic() < deadline:
                        time.sleep(0.02)
                with self.gate:
                    self.gate.wait_for(lambda: e < self.allowed, timeout=GATE_WAIT)
                w.push(Messages(e, epoch_table(e).to_batches()))
                w.push(Progress([(e, -1), (e + 1, 1)]))
                time.sleep(self.interval)
            w.push(Progress([(self.epochs, -1)]))
            w.close()
        except BaseException as exc:          # seen by the test
            self.error = exc


def committed(checkpoint: Any) -> bool:
    """Whether the checkpoint directory holds a committed snapshot (a manifest)."""
    return any(Path(checkpoint).glob("manifest-*.json"))


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def tap(stream: Any, kill: Optional[tuple], worker: Any) -> Any:
    """Pass the stream on; count batches (state kept through ``keep_state``); kill as told."""
    b = OperatorBuilder(stream.scope, "Tap")
    inp = b.new_input(stream)
    out, result = b.new_output()
    b.initial_capability().drop()
    mine = kill is not None and kill[1] == worker.index
    state = {"seen": 0, "run": 0, "after": 0, "saves": 0}

    def save(t: Any) -> int:
        state["saves"] += 1
        if mine and kill[0] == "save" and state["saves"] == kill[2]:
            _die()
        return state["seen"]

    restored = b.keep_state(save)
    if restored is not None:
        state["seen"] = restored

    def logic() -> None:
        for cap, batch in inp:
            state["seen"] += 1
            state["run"] += 1
            out.session(cap).give_batch(batch)
            if mine and kill[0] == "batch":
                after = len(kill) > 3 and kill[3]
                if after and committed(worker.config.checkpoint):
                    state["after"] += 1
                if (state["after"] if after else state["run"]) >= kill[2]:
                    _die()

    b.build(logic)
    return result


def pipeline(input_log: str, out: str, kill: Optional[tuple] = None, poll: float = 0.02) -> Any:
    """The worker function: the dataflow of the module's docstring until the input log
    closes; returns the worker's ``restored_time``."""
    def work(worker: Any) -> str:
        writers = {name: ParquetEventWriter(f"{out}/{name}", worker.index, worker.peers, flush_seconds=0.0,
                                            schema=schema) for name, schema in OUTPUTS.items()}

        def build(scope: Any) -> Any:
            rows = tap(follow(input_log, scope, poll=poll), kill, worker)
            totals = rows.select("k", "v").group_by("k").aggregate([("v", "sum"), ([], "count_all")], running=True)
            later = rows.select("k", w=pa.compute.field("v")).delay(lambda batch, t: t + 1)
            pairs = rows.select("k", "v").join(later, "k", running=True)
            labels = components(rows.select("src", "dst"), src="src", dst="dst")
            probes = []
            for name, stream in (("totals", totals), ("pairs", pairs), ("labels", labels)):
                stream.capture_into(writers[name])
                probes.append(stream.probe())
            return probes

        probes = worker.dataflow(build)
        worker.step_while(lambda: not all(p.done() for p in probes))
        for w in writers.values():
            w.close()
        return worker.restored_time

    return work


def _newest_manifest(checkpoint: Path) -> str:
    return max((p.name for p in Path(checkpoint).glob("manifest-*.json")), default="")


def _allow_after_snapshots(feeder: InputFeeder, checkpoint: Path, epochs: int, step: int,
                           done: threading.Event) -> None:
    """Let ``feeder`` write ``epochs`` epochs once a snapshot newer than the newest now is
    committed in ``checkpoint``, and ``step`` more after each newer one (an idle run
    commits no snapshot: more input must complete a time for a kill at a later save);
    stop when ``done`` is set."""
    before = _newest_manifest(checkpoint)
    while not done.wait(0.02):
        newest = _newest_manifest(checkpoint)
        if newest > before:
            feeder.allow(epochs)
            before, epochs = newest, epochs + step


def run_until_done(input_log: Path, out: Path, checkpoint: Path, kills: list, snapshot_every: float,
                   timeout: float, processes: int = 2, feeder: Optional[InputFeeder] = None,
                   per_attempt: int = 0) -> dict:
    """Run the pipeline with each kill of ``kills`` in turn (a run that ends without its
    kill firing ends the loop), then without one until it completes; returns counts
    (attempts, failures) and the last run's restored time.  With ``feeder``, each
    attempt lets it write ``per_attempt`` more epochs (a run without a kill: all)."""
    attempts, failures = 0, 0
    plan = list(kills) + [None] * 3
    for kill in plan:
        attempts += 1
        done = threading.Event()
        if feeder is not None:          # more input for every attempt (all of it for the last ones)
            allowed = attempts * per_attempt if kill is not None else feeder.epochs
            feeder.allow(allowed)
            # a kill "n batches after a committed snapshot" (or at the n-th save) needs input after
            # one: each time this attempt commits a snapshot, the feeder may write per_attempt epochs more
            threading.Thread(target=_allow_after_snapshots, daemon=True,
                             args=(feeder, checkpoint, allowed + per_attempt, per_attempt, done)).start()
        try:
            restored = ts.execute(pipeline(str(input_log), str(out), kill), processes=processes, timeout=timeout,
                                  checkpoint=str(checkpoint), snapshot_every=snapshot_every)
        except WorkerFailure:           # the kill: a worker process died
            failures += 1
            continue
        finally:
            done.set()
        return {"attempts": attempts, "failures": failures, "restored": restored[0]}
    raise AssertionError(f"the pipeline did not complete in {attempts} attempts")


def read_outputs(spark: Any, out: Path) -> dict:
    """Each output log as Spark reads it: a Counter of its rows (time and record columns)."""
    result = {}
    for name, schema in OUTPUTS.items():
        frame = spark.read.format("timely").load(str(out / name))
        columns = ["time"] + schema.names
        result[name] = Counter(tuple(r) for r in frame.select(*columns).collect())
    return result
