"""What a small round costs: the engine, the exchange and the operators, each beside a raw baseline.

Incremental work is many small rounds, so what a round costs when it carries little data is what
a user waits for. Each row is printed with its raw baseline, measured in the same run:

1. ``loop``: one record circulating through ``iterative`` + ``feedback`` on one worker,
   microseconds a round; baseline: a plain Python loop moving the record through a deque.
2. ``epoch``: an epoch across 2 processes (worker 0 sends one record to worker 1 and back,
   ``advance_to``, a probe), median microseconds; baseline: a raw socket round trip.
   ``epoch_threads``: the same across 2 threads of one process (``--switch-interval`` sets
   the GIL's switch interval for the run, to see whether it matters).
3. ``arrow``: Arrow record batches exchanged between 2 processes, GB/s per direction;
   baseline: the same bytes through a raw socket; and what each AEAD the mesh may use
   seals and opens a second on one core of this CPU.
4. ``components``: ``ts.graph.components`` on ``--edges`` random edges (``--threads``, 2), the median
   small epoch of ``--changes`` inserted edges, and of 90 % inserts and 10 % withdrawals, with
   its parts (operator logic, from the engine's ``schedule`` events; the rest: the engine and
   the exchange); baseline: the batch form recomputing the whole graph.  Beside it, from the
   ``"graph"`` logging stream: the median rounds of the labels loop per epoch, and of the split
   search the visits per epoch (both workers) and the vertices they reached; below it, the same
   epochs on 1 worker thread (a small epoch's operator work is mostly numpy's fixed cost a call,
   which every worker pays: it does not divide between workers) and on ``--threads`` worker processes
   (each worker's Python on a GIL of its own); with ``--parts``,
   a second run with the methods doing each part wrapped prints each part's thread CPU
   (both workers, median of the epochs: ``PARTS``).
5. ``pagerank``: ``ts.graph.pagerank_stream`` output rows per changed edge in the same epochs, at its
   default output tolerance and beside it with ``output_tolerance=0`` (every rank it changes re-emitted).
6. ``spark``: ``connected_components`` of ``--spark-edges`` random edges (20,000,000) on Spark
   ``local[2]``, its input read from Parquet files and from a cached DataFrame, each warm run
   against the same graph on 2 local worker threads; baseline: scipy on one core.  These are
   ``bench_graph.py``'s methods (each in a process of its own, its result checked against
   scipy's), run by this script for their ratios.

    python jobs/benchmarks/bench_rounds.py [--only loop,epoch,epoch_threads,arrow,components,pagerank,spark]
                                           [--edges N] [--changes N] [--epochs N] [--threads N]
                                           [--switch-interval S] [--parts] [--spark-edges N]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import deque
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa
from bench_engine import loop_rounds  # beside this script

import timely_spark as ts


def loop_round(rounds: int) -> tuple[float, float]:
    """Seconds a round of one record through a feedback loop on one worker (bench_engine's loop),
    and CPU seconds a round (this process's: the worker thread's, as the caller only waits)."""
    cpu = time.process_time()
    wall = loop_rounds(rounds) / rounds
    return wall, (time.process_time() - cpu) / rounds


def python_round(rounds: int) -> float:
    """The same record moved by hand: a deque per operator, the round counted, the branch tested."""
    queues = [deque(), deque(), deque()]
    queues[0].append((0, "token"))
    start = time.perf_counter()
    while True:
        t, x = queues[0].popleft()
        queues[1].append((t, x))
        t, x = queues[1].popleft()
        if not t < rounds:
            break
        queues[2].append((t, x))
        t, x = queues[2].popleft()
        queues[0].append((t + 1, x))
    return (time.perf_counter() - start) / rounds


def sync(worker) -> None:
    ts.sync.Barrier(worker).wait()


def context_switches() -> tuple[int, int]:
    """The calling thread's context switches so far (Linux; (0, 0) elsewhere): voluntary ones (it
    blocked, in ``poll`` say, and was woken) and involuntary ones (another thread took its CPU)."""
    counts = {}
    try:
        with open("/proc/thread-self/status") as f:
            for line in f:
                if "ctxt_switches" in line:
                    name, value = line.split(":")
                    counts[name] = int(value)
    except OSError:
        pass
    return counts.get("voluntary_ctxt_switches", 0), counts.get("nonvoluntary_ctxt_switches", 0)


def epoch_latency(epochs: int, processes: int = 2, threads: int = 1) -> tuple[float, float, dict]:
    """The median seconds of an epoch in which one record goes to the other worker and back
    (2 processes, or 2 threads of one), the CPU seconds an epoch of both workers' threads
    together (what a loaded machine disturbs less than the wall clock), and its parts per
    worker and epoch (the larger of the two workers'): ``steps`` (worker steps) and ``frames``
    (sealed frames sent to the other process; each holds that step's data and progress), ``wakeups``
    (the worker thread's voluntary context switches: times it blocked and was woken) and ``preempted``
    (its involuntary ones: times another thread, the peer woken by a frame say, took its CPU)."""
    def work(worker):
        def build(scope):
            inp, stream = scope.new_input()
            return inp, stream.exchange(lambda r: 1).exchange(lambda r: 0).probe()

        inp, probe = worker.dataflow(build)
        sync(worker)
        mesh = getattr(worker.allocator, "mesh", None)
        conns = list(mesh.connections.values()) if mesh is not None else []
        frames = sum(c.frames_sealed for c in conns)
        times, steps = [], 0
        switches = context_switches()
        cpu = time.thread_time()
        for epoch in range(epochs):
            start = time.perf_counter()
            if worker.index == 0:
                inp.send(epoch)
            inp.advance_to(epoch + 1)
            while probe.less_than(epoch + 1):
                worker.step()
                steps += 1
            times.append(time.perf_counter() - start)
        cpu = (time.thread_time() - cpu) / epochs
        woken, preempted = (b - a for a, b in zip(switches, context_switches()))
        parts = {"steps": steps / epochs, "frames": (sum(c.frames_sealed for c in conns) - frames) / epochs,
                 "wakeups": woken / epochs, "preempted": preempted / epochs}
        return statistics.median(times[epochs // 10:]), cpu, parts

    results = ts.execute(work, processes=processes, threads=threads, timeout=600)
    parts = {k: max(r[2][k] for r in results) for k in results[0][2]}
    return max(r[0] for r in results), sum(r[1] for r in results), parts


def arrow_exchange(total_mb: int, batch_mb: int = 4) -> tuple[float, float]:
    """Bytes a second per direction: each of 2 processes sends ``total_mb / 2`` MB of Arrow batches to the other;
    and the CPU seconds both processes spent (all their threads) per GB sent each way."""
    def work(worker):
        rows = batch_mb * (1 << 20) // 16
        rb = pa.record_batch({"a": pa.array(np.arange(rows)), "b": pa.array(np.arange(rows, dtype=np.float64))})
        got = [0]

        def build(scope):
            inp, stream = scope.new_input()
            probe = stream.exchange(lambda b: worker.index + 1).inspect(
                lambda b: got.__setitem__(0, got[0] + b.nbytes)).probe()
            return inp, probe

        inp, probe = worker.dataflow(build)
        sync(worker)
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(total_mb // batch_mb // worker.peers):
            inp.send_batch([rb])
            worker.step()
        inp.close()
        worker.step_while(lambda: not probe.done(), timeout=600)
        return got[0], time.perf_counter() - start, time.process_time() - cpu

    results = ts.execute(work, processes=2, timeout=600)
    return min(r[0] / r[1] for r in results), sum(r[2] for r in results) / (results[0][0] / 1e9)


def aead_rates(mb: int = 4, frames: int = 64) -> dict:
    """GB/s sealing and opening ``mb`` MB frames on this CPU, per cipher the mesh may use."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

    data = np.random.default_rng(0).bytes(mb << 20)
    sealed = bytearray(len(data) + 16)
    plain = bytearray(len(data))
    rates = {}
    for name, cipher in (("AES-256-GCM", AESGCM), ("ChaCha20-Poly1305", ChaCha20Poly1305)):
        aead = cipher(bytes(32))
        nonce = bytes(12)
        start = time.perf_counter()
        for _ in range(frames):
            aead.encrypt_into(nonce, data, b"", sealed)
        seal = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(frames):
            aead.decrypt_into(nonce, sealed, b"", plain)
        rates[name] = (len(data) * frames / seal / 1e9, len(data) * frames / (time.perf_counter() - start) / 1e9)
    return rates


RAW_PEER = r"""
import socket, sys
mode, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
buf = bytearray(1 << 22); view = memoryview(buf)
if mode == "sink":
    left = size
    while left:
        n = s.recv_into(view[:min(left, len(buf))])
        if not n: break
        left -= n
    s.sendall(b"k")
else:
    while True:
        n = s.recv_into(buf)
        if not n: break
        s.sendall(buf[:n])
"""


def raw_peer(mode: str, size: int) -> tuple[subprocess.Popen, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        proc = subprocess.Popen([sys.executable, "-c", RAW_PEER, mode, str(listener.getsockname()[1]), str(size)])
        listener.settimeout(60)
        conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return proc, conn


def raw_round_trip(trips: int) -> float:
    proc, conn = raw_peer("echo", 0)
    with conn:
        times = []
        for _ in range(trips):
            start = time.perf_counter()
            conn.sendall(b"x" * 16)
            got = 0
            while got < 16:
                got += len(conn.recv(64))
            times.append(time.perf_counter() - start)
    proc.wait(60)
    return statistics.median(times)


def raw_copy(total_bytes: int, chunk: int = 4 << 20) -> float:
    proc, conn = raw_peer("sink", total_bytes)
    data = memoryview(bytes(chunk))
    with conn:
        start = time.perf_counter()
        for sent in range(0, total_bytes, chunk):
            conn.sendall(data[:min(chunk, total_bytes - sent)])
        conn.recv(1)
        elapsed = time.perf_counter() - start
    proc.wait(60)
    return total_bytes / elapsed


def edge_epochs(rng, base: pa.Table, vertices: int, epochs: int, size: int, delete_share: float) -> list:
    deletes = int(size * delete_share)
    gone = rng.choice(base.num_rows, deletes * epochs, replace=False)
    out = []
    for e in range(epochs):
        rows = base.take(gone[e * deletes:(e + 1) * deletes])
        n = size - deletes
        out.append(pa.record_batch({
            "src": np.concatenate([rng.integers(0, vertices, n), rows["src"].to_numpy()]),
            "dst": np.concatenate([rng.integers(0, vertices, n), rows["dst"].to_numpy()]),
            "diff": np.concatenate([np.ones(n, np.int64), -np.ones(deletes, np.int64)])}))
    return out


#: The parts of a ``components`` epoch (``--parts``), by the methods doing them: (label, class, method),
#: each part within the one above it with one indent less.
PARTS = [
    ("worker steps (everything)", "timely_spark.dataflow.worker.Worker", "step"),
    (" the labels operator (ComponentLabels.step)", "timely_spark.graph.component_labels.ComponentLabels", "step"),
    ("  round 0: withdrawals, seeds, stars (edges_in)", "timely_spark.graph.component_labels.ComponentLabels",
     "edges_in"),
    ("  the search's rounds (search_round)", "timely_spark.graph.component_labels.ComponentLabels", "search_round"),
    ("   visits (_visit)", "timely_spark.graph.component_labels.ComponentLabels", "_visit"),
    ("   SplitSearch.decide", "timely_spark.graph.split_search.SplitSearch", "decide"),
    ("   SplitSearch.update", "timely_spark.graph.split_search.SplitSearch", "update"),
    ("   SplitSearch.choose", "timely_spark.graph.split_search.SplitSearch", "choose"),
    ("  small contractions (replicated)", "timely_spark.graph.component_labels.ComponentLabels", "replicated"),
    ("  broadcasts sent (_send)", "timely_spark.graph.component_labels.ComponentLabels", "_send"),
    (" the edge counts (EdgeCounts.update)", "timely_spark.graph.incremental_components.EdgeCounts", "update"),
    (" rows routed to workers (ExchangeBy.split)", "timely_spark.dataflow.operators.exchange_by.ExchangeBy",
     "split"),
]


@contextmanager
def counted_parts(parts: list):
    """Wrap the methods of ``parts`` to add the thread CPU seconds of each call to a dict per
    thread (``{thread id: {label: seconds}}``, yielded); a call nested in one of the same
    method (a subclass's ``super()``) is counted once.  The methods are put back on exit."""
    import importlib

    spent: dict = {}
    saved = []
    for label, where, name in parts:
        module, cls_name = where.rsplit(".", 1)
        cls = getattr(importlib.import_module(module), cls_name)
        original = cls.__dict__[name]
        saved.append((cls, name, original))

        def wrapped(*args, _original=original, _label=label, **kwargs):
            mine = spent.setdefault(threading.get_ident(), {})
            if mine.get(("depth", _label)):
                return _original(*args, **kwargs)
            mine[("depth", _label)] = True
            began = time.thread_time()
            try:
                return _original(*args, **kwargs)
            finally:
                mine[_label] = mine.get(_label, 0.0) + time.thread_time() - began
                mine[("depth", _label)] = False

        setattr(cls, name, wrapped)
    try:
        yield spent
    finally:
        for cls, name, original in saved:
            setattr(cls, name, original)


def stream_epochs(algorithm, base: pa.Table, epochs: list, threads: int = 2,
                  loop: str = "Components", parts: Optional[dict] = None,
                  processes: int = 1) -> tuple[list, list, list, list, list]:
    """Per small epoch: seconds, seconds in operator logic (worker 0), rows emitted, CPU seconds
    of all the worker threads together, and ``(rounds, visits, reached)``: the rounds at which
    the ``loop`` operator ran on some worker, the visits its split search took on all of them
    and the vertices they reached (``ts.graph.GRAPH_LOG`` events; zeros for an algorithm that
    reports none).  With ``parts`` (of :func:`counted_parts`), the CPU seconds of each part per
    epoch and worker are appended to its ``"epochs"`` list (``threads`` workers in each of ``processes``
    processes; ``parts`` needs one process)."""
    def work(worker):
        rows: list = [0] * (len(epochs) + 1)
        busy = [0.0]
        rounds: list = [set() for _ in range(len(epochs) + 1)]
        visits: list = [[0, 0] for _ in range(len(epochs) + 1)]

        def on_graph(events):    # the loop's rounds (its state reports, one a round) and its visits
            for e in events:
                if e.get("name") != loop:
                    continue
                outer, inner = tuple(e["frontier"][0])
                if e["event"] == "state":
                    rounds[outer].add(inner)
                elif e["event"] in ("visits", "reached"):
                    visits[outer][e["event"] == "reached"] += e["count"]

        worker.log_register().insert(ts.graph.GRAPH_LOG, on_graph)
        open_: list = []      # [start, nested] of the schedules under way (a scope's holds its operators')

        def on_events(events):   # operator logic: schedules with no schedule nested in them
            for e in events:
                if e["event"] != "schedule":
                    continue
                if e["start"]:
                    if open_:
                        open_[-1][1] = True
                    open_.append([e["elapsed"], False])
                elif open_:
                    began, nested = open_.pop()
                    if not nested:
                        busy[0] += e["elapsed"] - began

        def build(scope):
            inp, edges = scope.new_input()
            out = algorithm(edges).inspect_time(lambda t, rb: rows.__setitem__(t, rows[t] + rb.num_rows))
            return inp, out.probe()

        inp, probe = worker.dataflow(build)
        times, logic, cpu = [], [], []
        before: dict = {}                      # this thread's parts so far (with parts)
        for e, batch in enumerate([base.to_batches()[0], *epochs]):
            if e == 1 and worker.index == 0:
                worker.log_register().insert("timely", on_events)
            busy[0] = 0.0
            start, began = time.perf_counter(), time.thread_time()
            if worker.index == 0:
                inp.send(batch)
            inp.advance_to(e + 1)
            worker.step_while(lambda: probe.less_than(inp.time), timeout=3600)
            times.append(time.perf_counter() - start)
            cpu.append(time.thread_time() - began)
            if parts is not None:
                mine = parts.get(threading.get_ident(), {})
                now = {k: v for k, v in mine.items() if isinstance(k, str)}
                if e:
                    parts.setdefault("epochs", []).append(
                        (e, {k: v - before.get(k, 0.0) for k, v in now.items()}))
                before = now
            logic.append(busy[0])
        worker.log_register().flush()
        return times[1:], logic[1:], rows[1:], cpu[1:], rounds[1:], visits[1:]

    parts = ts.execute(work, threads=threads, processes=processes, timeout=7200)
    times = [max(p[0][i] for p in parts) for i in range(len(epochs))]
    rows = [sum(p[2][i] for p in parts) for i in range(len(epochs))]
    cpu = [sum(p[3][i] for p in parts) for i in range(len(epochs))]
    search = [(len(set().union(*(p[4][i] for p in parts))), sum(p[5][i][0] for p in parts),
               sum(p[5][i][1] for p in parts)) for i in range(len(epochs))]
    return times, parts[0][1], rows, cpu, search


def graph_rows(args, rng) -> None:
    m, v = args.edges, args.edges // 2
    base = pa.table({"src": rng.integers(0, v, m), "dst": rng.integers(0, v, m)}).combine_chunks()
    start = time.perf_counter()
    ts.graph.connected_components(base, workers=2)
    scratch = time.perf_counter() - start
    for label, share in (("inserts", 0.0), ("10% withdrawals", 0.1)):
        epochs = edge_epochs(rng, base, v, args.epochs, args.changes, share)
        if "components" in args.only:
            times, logic, rows, cpu, search = stream_epochs(ts.graph.components, base, epochs, args.threads)
            med = statistics.median(times)
            print(f"components, epochs of {args.changes:,} changed edges ({label}), {m:,} edges, "
                  f"{args.threads} threads: median {med * 1e3:.1f} ms ({statistics.median(cpu) * 1e3:.1f} ms of CPU, "
                  "both workers; "
                  f"operator logic on worker 0 {statistics.median(logic) * 1e3:.1f} ms, "
                  f"engine and exchange the rest); batch form from scratch {scratch * 1e3:.0f} ms, "
                  f"ratio {med / scratch:.3f}; rows emitted per epoch {statistics.median(rows):,.0f}; "
                  f"rounds per epoch {statistics.median(r for r, _, _ in search):g} "
                  f"(max {max(r for r, _, _ in search)}), split search visits per epoch "
                  f"{statistics.median(v for _, v, _ in search):,.0f} reaching "
                  f"{statistics.median(n for _, _, n in search):,.0f} vertices")
            if args.threads > 1:      # a small epoch's operator work is numpy's fixed cost a call: it does not divide
                times, logic, _, cpu, _ = stream_epochs(ts.graph.components, base, epochs, 1)
                print(f"  the same epochs on 1 worker thread: median {statistics.median(times) * 1e3:.1f} ms "
                      f"({statistics.median(cpu) * 1e3:.1f} ms of CPU; operator logic "
                      f"{statistics.median(logic) * 1e3:.1f} ms)")
                times, _, _, cpu, _ = stream_epochs(ts.graph.components, base, epochs, 1, processes=args.threads)
                print(f"  the same epochs on {args.threads} worker processes: median "
                      f"{statistics.median(times) * 1e3:.1f} ms ({statistics.median(cpu) * 1e3:.1f} ms of CPU, "
                      "both workers; no GIL shared)")
            if args.parts:
                with counted_parts(PARTS) as spent:
                    stream_epochs(ts.graph.components, base, epochs, args.threads, parts=spent)
                per_epoch: dict = {}
                for e, part in spent["epochs"]:
                    for name, secs in part.items():
                        per_epoch.setdefault(name, {}).setdefault(e, 0.0)
                        per_epoch[name][e] += secs               # both workers
                print(f"  its parts ({label}; thread CPU of both workers, median of the epochs, a second run "
                      "with the methods wrapped):")
                for part, _, _ in PARTS:
                    ms = statistics.median(per_epoch.get(part, {0: 0.0}).values()) * 1e3
                    print(f"  {part}: {ms:.2f} ms")
        if "pagerank" in args.only:
            for what, options in (("default output tolerance", {}), ("output_tolerance=0", {"output_tolerance": 0})):
                times, _, rows, cpu, _ = stream_epochs(lambda e: ts.graph.pagerank_stream(e, tolerance=1e-9, **options),
                                                    base, epochs, args.threads)
                print(f"pagerank_stream, same epochs ({label}), {what}: median {statistics.median(times) * 1e3:.1f} "
                      f"ms ({statistics.median(cpu) * 1e3:.1f} ms of CPU, both workers), "
                      f"{statistics.median(rows) / args.changes:.1f} rows emitted per changed edge")


#: ``bench_graph.py``'s methods of the ``spark`` row: the reference, local threads, Spark from files, from a cache.
SPARK_METHODS = ("cc-scipy", "cc-local", "cc-spark", "cc-spark-cached")


def spark_row(edges: int) -> str:
    """The ``spark`` row: ``bench_graph.py --sizes edges`` for :data:`SPARK_METHODS` (each warm run, in a
    process of its own, checked against scipy), summed up as one line of seconds and ratios."""
    script = Path(__file__).with_name("bench_graph.py")
    run = subprocess.run([sys.executable, str(script), "--sizes", str(edges), "--only", ",".join(SPARK_METHODS)],
                         capture_output=True, text=True, timeout=7200)
    seconds = {}
    for line in run.stdout.splitlines():
        words = line.split()
        if len(words) > 2 and words[0] in SPARK_METHODS and words[2] == "s":
            seconds[words[0]] = float(words[1])
    missing = [m for m in SPARK_METHODS if m not in seconds]
    if run.returncode or "all methods agree" not in run.stdout or missing:
        raise SystemExit(f"spark row: {script.name} exited {run.returncode}, "
                         + (f"no time for {', '.join(missing)}" if missing else "a method failed or disagrees")
                         + f":\n{run.stdout}\n{run.stderr[-3000:]}")
    local = seconds["cc-local"]
    return (f"components of {edges:,} edges, warm runs: 2 local worker threads {local:.2f} s; Spark local[2] from "
            f"Parquet files {seconds['cc-spark']:.2f} s (ratio {seconds['cc-spark'] / local:.2f}), from a cached "
            f"DataFrame {seconds['cc-spark-cached']:.2f} s (ratio {seconds['cc-spark-cached'] / local:.2f}); "
            f"scipy on one core {seconds['cc-scipy']:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="loop,epoch,epoch_threads,arrow,components,pagerank,spark")
    parser.add_argument("--rounds", type=int, default=100_000)
    parser.add_argument("--trips", type=int, default=2_000)
    parser.add_argument("--arrow-mb", type=int, default=2_048)
    parser.add_argument("--edges", type=int, default=2_000_000)
    parser.add_argument("--changes", type=int, default=1_000)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2, help="worker threads of the components and pagerank rows")
    parser.add_argument("--parts", action="store_true",
                        help="components: also the CPU of an epoch's parts (a second run, methods wrapped)")
    parser.add_argument("--switch-interval", type=float, default=None,
                        help="sys.setswitchinterval (seconds) for the whole run (default: Python's, 0.005)")
    parser.add_argument("--spark-edges", type=int, default=20_000_000, help="edges of the spark row's graph")
    args = parser.parse_args()
    args.only = set(args.only.split(","))
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    if "loop" in args.only:
        (engine, cpu), plain = loop_round(args.rounds), python_round(args.rounds)
        print(f"loop, one record, one worker: {engine * 1e6:.1f} us a round ({cpu * 1e6:.1f} us of CPU); the same "
              f"moves in plain Python {plain * 1e6:.2f} us (ratio {engine / plain:.0f}); timely-dataflow in Rust: "
              "about 1.6 us")
    if "epoch" in args.only:
        (epoch, cpu, parts), raw = epoch_latency(args.trips), raw_round_trip(args.trips)
        print(f"epoch across 2 processes (one record there and back, advance_to, probe): median {epoch * 1e6:.0f} us "
              f"({cpu * 1e6:.0f} us of CPU, both workers; a worker's epoch: {parts['steps']:.2f} steps, "
              f"{parts['frames']:.2f} frames sent, {parts['wakeups']:.2f} wake-ups, {parts['preempted']:.2f} "
              f"preemptions); raw socket round trip {raw * 1e6:.0f} us (ratio {epoch / raw:.1f})")
    if "epoch_threads" in args.only:
        epoch, cpu, parts = epoch_latency(args.trips, processes=1, threads=2)
        print(f"epoch across 2 threads of one process (the same dataflow), switch interval "
              f"{sys.getswitchinterval() * 1e3:g} ms: median {epoch * 1e6:.0f} us ({cpu * 1e6:.0f} us of CPU, "
              f"both workers; a worker's epoch: {parts['steps']:.2f} steps; the engine without the mesh)")
    if "arrow" in args.only:
        (rate, cpu), raw = arrow_exchange(args.arrow_mb), raw_copy(args.arrow_mb << 20)
        print(f"Arrow exchange between 2 processes: {rate / 1e9:.2f} GB/s per direction ({cpu:.2f} s of CPU per GB "
              f"each way, both processes); raw socket {raw / 1e9:.2f} GB/s (ratio {rate / raw:.2f})")
        print("AEAD on this CPU, 4 MB frames, one core: " + "; ".join(
            f"{name} seals {seal:.1f} GB/s, opens {open_:.1f} GB/s" for name, (seal, open_) in aead_rates().items()))
    if args.only & {"components", "pagerank"}:
        graph_rows(args, np.random.default_rng(7))
    if "spark" in args.only:
        print(spark_row(args.spark_edges))


if __name__ == "__main__":
    main()
