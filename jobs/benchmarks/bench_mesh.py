"""Benchmark of the TCP mesh: 2 processes on loopback, next to raw sockets in the same run.

1. Exchange of (int, int) records in batches of 10,000: records/s per worker.
2. Exchange of Arrow record batches: GB/s per direction, next to a raw socket copy of
   the same bytes (one direction).
3. Ping-pong: a message crosses between two workers in different processes and back,
   through the mesh alone (a channel's pushers, no dataflow): microseconds per round
   trip, next to a raw Python socket ping-pong between two processes.
4. An epoch across 2 processes: worker 0 sends one record to worker 1, which sends it
   back; both step until the epoch is complete at a probe (data and progress both cross
   the mesh): the median epoch, in microseconds.
5. A loop round across 2 processes: a ``feedback`` loop whose one record crosses to the
   other worker every round: microseconds per round.

Every frame on the mesh is encrypted and authenticated (AES-256-GCM; set
``TIMELY_SPARK_ENCRYPTION=off`` to measure authentication alone); the raw socket figures
are the unprotected floor.

    python jobs/benchmarks/bench_mesh.py [--records N] [--arrow-mb N] [--trips N] [--epochs N]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

import timely_spark as ts

BATCH = 10_000


def sync(worker) -> None:
    """Wait until every worker gets here (a one-shot barrier dataflow)."""
    inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.probe()))(*s.new_input()), time=())
    inp.close()
    worker.step_while(lambda: not probe.done(), timeout=120)


def exchange_records(records: int) -> float:
    def work(worker):
        mine = records // worker.peers
        batches = [[(i, i) for i in range(s, min(s + BATCH, mine))] for s in range(0, mine, BATCH)]
        received = [0]

        def build(scope):
            inp, stream = scope.new_input()
            probe = stream.exchange(lambda r: r[0]).inspect_batch(
                lambda t, b: received.__setitem__(0, received[0] + len(b))).probe()
            return inp, probe

        inp, probe = worker.dataflow(build)
        sync(worker)
        start = time.perf_counter()
        for b in batches:
            inp.send_batch(b)
            worker.step()
        inp.close()
        worker.step_while(lambda: not probe.done(), timeout=600)
        return mine, time.perf_counter() - start, received[0]

    results = ts.execute(work, processes=2)
    assert sum(r[2] for r in results) == sum(r[0] for r in results), "records were lost"
    return max(r[1] for r in results)


def exchange_arrow(total_mb: int, batch_mb: int = 4) -> tuple[float, int]:
    def work(worker):
        import pyarrow as pa

        rows = batch_mb * (1 << 20) // 16
        rb = pa.record_batch({"a": pa.array(range(rows), pa.int64()), "b": pa.array(range(rows), pa.float64())})
        count = total_mb // batch_mb // worker.peers
        got = [0]

        def build(scope):
            inp, stream = scope.new_input()
            probe = stream.exchange(lambda b: worker.index + 1).inspect(
                lambda b: got.__setitem__(0, got[0] + b.nbytes)).probe()
            return inp, probe

        inp, probe = worker.dataflow(build)
        sync(worker)
        start = time.perf_counter()
        for _ in range(count):
            inp.send_batch([rb])
            worker.step()
        inp.close()
        worker.step_while(lambda: not probe.done(), timeout=600)
        return got[0], time.perf_counter() - start

    results = ts.execute(work, processes=2)
    moved = sum(r[0] for r in results)
    return max(r[1] for r in results), moved


RAW_PEER = r"""
import socket, sys
mode, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
if mode == "sink":
    buf = bytearray(1 << 22); view = memoryview(buf); left = size
    while left:
        n = s.recv_into(view[:min(left, len(buf))])
        if not n: break
        left -= n
    s.sendall(b"k")
else:
    buf = bytearray(size)
    while True:
        n = s.recv_into(buf)
        if not n: break
        s.sendall(buf[:n])
"""


def _raw_peer(mode: str, size: int):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", RAW_PEER, mode, str(port), str(size)])
    conn, _ = listener.accept()
    listener.close()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return proc, conn


def raw_copy(total_bytes: int, chunk: int = 4 << 20) -> float:
    proc, conn = _raw_peer("sink", total_bytes)
    data = bytes(chunk)
    start = time.perf_counter()
    sent = 0
    while sent < total_bytes:
        n = min(chunk, total_bytes - sent)
        conn.sendall(memoryview(data)[:n])
        sent += n
    conn.recv(1)
    elapsed = time.perf_counter() - start
    conn.close()
    proc.wait()
    return elapsed


def raw_ping_pong(trips: int) -> float:
    proc, conn = _raw_peer("echo", 64)
    msg = b"x" * 16
    start = time.perf_counter()
    for _ in range(trips):
        conn.sendall(msg)
        got = 0
        while got < len(msg):
            got += len(conn.recv(64))
    elapsed = time.perf_counter() - start
    conn.close()
    proc.wait()
    return elapsed / trips


def ping_pong(trips: int) -> float:
    rounds = 2 * trips

    def work(worker):
        def build(scope):
            def loop(inner):
                handle, cycle = inner.feedback(1)
                x = scope.to_stream([0] if scope.index == 0 else []).enter(inner).concat(cycle)
                again, done = x.branch(lambda r: r >= rounds)
                # round r is handled by worker r % 2: every round crosses the mesh
                again.map(lambda r: r + 1).exchange(lambda r: r).connect_loop(handle)
                return done.leave()

            return scope.iterative(loop).probe()

        probe = worker.dataflow(build)
        sync(worker)
        start = time.perf_counter()
        worker.step_while(lambda: not probe.done(), timeout=600)
        return time.perf_counter() - start

    results = ts.execute(work, processes=2)
    return max(results) / trips


def epoch_latency(epochs: int) -> float:
    """The median time of an epoch in which one record goes to the other worker and back."""
    def work(worker):
        def build(scope):
            inp, stream = scope.new_input()
            back = stream.exchange(lambda r: 1).map(lambda r: r).exchange(lambda r: 0)
            return inp, back.probe()

        inp, probe = worker.dataflow(build)
        sync(worker)
        times = []
        for epoch in range(epochs):
            start = time.perf_counter()
            if worker.index == 0:
                inp.send(epoch)
            inp.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(epoch + 1), timeout=60)
            times.append(time.perf_counter() - start)
        return statistics.median(times[epochs // 10:])

    return max(ts.execute(work, processes=2))


def mesh_ping_pong(trips: int) -> float:
    """Round trips of a small message through a channel of the mesh (no dataflow)."""
    def work(worker):
        from timely_spark.communication.allocator import Inbox

        inbox = Inbox(lambda: None)
        _, pushers = worker.allocate_channel(inbox)
        other = pushers[1 - worker.index]
        sync(worker)

        def take():
            while not inbox.queue:
                worker.allocator.receive(1.0)
            return inbox.queue.popleft()

        start = time.perf_counter()
        for i in range(trips):
            if worker.index == 0:
                other.push((0, [i]))
                take()
            else:
                other.push(take())
        return time.perf_counter() - start

    return max(ts.execute(work, processes=2)) / trips


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--arrow-mb", type=int, default=2048)
    parser.add_argument("--trips", type=int, default=5_000)
    parser.add_argument("--epochs", type=int, default=2_000)
    args = parser.parse_args()
    mode = "encryption OFF (authenticated only)" if os.environ.get("TIMELY_SPARK_ENCRYPTION", "").lower() in (
        "off", "0", "false", "no") else "encrypted and authenticated (AES-256-GCM)"
    print(f"mesh frames: {mode}")

    elapsed = exchange_records(args.records)
    per_worker = args.records / 2 / elapsed
    print(f"exchange, {args.records:,} (int, int) records, 2 processes: {per_worker:,.0f} records/s per worker "
          f"({elapsed:.2f} s)")

    t_arrow, moved = exchange_arrow(args.arrow_mb)
    t_raw = raw_copy(moved // 2)
    print(f"arrow exchange, {moved / 1e9:.2f} GB both ways: {moved / 2 / t_arrow / 1e9:.2f} GB/s per direction; "
          f"raw socket copy {moved / 2 / t_raw / 1e9:.2f} GB/s (one direction)")

    alone = mesh_ping_pong(args.trips)
    raw = raw_ping_pong(args.trips)
    print(f"ping-pong through the mesh: {alone * 1e6:.1f} us per round trip; raw Python sockets {raw * 1e6:.1f} us")

    epoch = epoch_latency(args.epochs)
    raw = raw_ping_pong(args.trips)
    print(f"an epoch across 2 processes (one record there and back, progress included): median {epoch * 1e6:.1f} us; "
          f"raw socket round trip {raw * 1e6:.1f} us")

    rt = ping_pong(args.trips)
    print(f"a feedback-loop round across 2 processes: {rt / 2 * 1e6:.1f} us per round "
          f"({rt * 1e6:.1f} us per round trip; timely-dataflow in Rust: about 49 us)")


if __name__ == "__main__":
    main()
