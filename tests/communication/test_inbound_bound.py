"""What a process reads ahead of its workers is bounded per peer (a receiver that does not
step holds its sender back instead of buffering without limit), and two processes flooding
each other past that bound on both sides still finish: a worker waiting for room to send
reads every connection past the bound.  Real sockets, two meshes of one test process."""

import threading
import time

import numpy as np
import pyarrow as pa

from timely_spark.communication.codec import encode

from .test_encryption import connected_pair

MB = 1 << 20


def arrow(i, mb=1):
    return (i, [pa.record_batch({"x": pa.array(np.arange(i, i + mb * MB // 8))})])


def plain(i, mb=1):
    return (i, [float(x) for x in range(i, i + mb * MB // 9)])     # a list batch, pickled: ~1 MB


def same(a, b):
    (t, x), (u, y) = a, b
    return t == u and (x[0].equals(y[0]) if isinstance(y[0], pa.RecordBatch) else x == y)


def sender(conn, source, target, payloads, errors):
    def run():
        try:
            for p in payloads:
                kind, parts = encode(p)
                conn.send(7, source, target, kind, parts)
            conn.flush()
        except BaseException as exc:      # (reported by the test)
            errors.append(exc)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def take_all(mesh, mailbox, count, deadline):
    """What a worker does when it steps: read the sockets, take what waits in its mailbox."""
    got = []
    while len(got) < count and time.monotonic() < deadline:
        mesh.read_all()
        while not mailbox.empty():
            item = mailbox.get()
            item.release()                # (the worker took it: Allocator.drain does this)
            got.append(item[1])
        time.sleep(0.001)
    return got


def shut(meshes):
    ends = [threading.Thread(target=m.shutdown, args=(True,)) for m in meshes]
    for t in ends:
        t.start()
    for t in ends:
        t.join(30)


def test_a_receiver_that_does_not_step_holds_its_sender_back_within_the_bound():
    limit = MB
    meshes, fabrics = connected_pair(peer_timeout=30, inbound_limit=limit)
    sent = [arrow(i) for i in range(64)]           # 64 MB: past the bound, the write-behind queue and the kernel's
    errors: list = []
    t = sender(meshes[1].connections[0], 1, 0, sent, errors)
    peak = 0
    until = time.monotonic() + 5                    # nobody steps on process 0: only its watchdog reads
    while time.monotonic() < until:
        peak = max(peak, meshes[0].read_ahead(1))
        time.sleep(0.01)
    assert t.is_alive(), "the sender sent everything while the receiver took nothing: no back-pressure"
    assert limit <= peak <= limit + MB + 64 * 1024, f"read ahead {peak} bytes with a bound of {limit}"
    got = take_all(meshes[0], fabrics[0].mailboxes[0], len(sent), time.monotonic() + 60)
    t.join(30)
    assert not errors and not t.is_alive()
    assert len(got) == len(sent) and all(same(a, b) for a, b in zip(got, sent))
    assert meshes[0].read_ahead(1) == 0
    shut(meshes)
    assert all(f.failure is None for f in fabrics)


def test_two_processes_flooding_each_other_past_both_bounds_finish_with_everything_once():
    limit = 2 * MB
    meshes, fabrics = connected_pair(peer_timeout=5, inbound_limit=limit)
    to_0 = [arrow(i) for i in range(80)]           # each way far more than the bound, the write-behind
    to_1 = [plain(i) for i in range(80)]           # queue (32 MB) and the sockets' buffers hold
    errors: list = []
    got: list = [[], []]

    def worker(p, payloads, count):                 # sends everything, taking nothing meanwhile (one
        conn = meshes[p].connections[1 - p]         # operator's output in one step), then steps
        for payload in payloads:
            kind, parts = encode(payload)
            conn.send(7, p, 1 - p, kind, parts)
        conn.flush()
        got[p] = take_all(meshes[p], fabrics[p].mailboxes[0], count, time.monotonic() + 60)

    def run(*args):
        try:
            worker(*args)
        except BaseException as exc:                # (reported by the test)
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(1, to_0, len(to_1)), daemon=True),
               threading.Thread(target=run, args=(0, to_1, len(to_0)), daemon=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not errors, f"the workers failed: {errors}"
    assert not any(t.is_alive() for t in threads)
    assert len(got[0]) == len(to_0) and all(same(a, b) for a, b in zip(got[0], to_0))
    assert len(got[1]) == len(to_1) and all(same(a, b) for a, b in zip(got[1], to_1))
    assert fabrics[0].mailboxes[0].empty() and fabrics[1].mailboxes[0].empty()      # nothing twice
    shut(meshes)
    assert all(f.failure is None for f in fabrics)


def test_a_receiver_busy_past_the_peer_timeout_holds_its_sender_back_without_failing_it():
    # Busy is not stuck: process 0 takes nothing for 2.5 peer timeouts, but its heartbeats
    # still reach process 1, whose sends wait (held by the bound) and then all arrive.
    meshes, fabrics = connected_pair(peer_timeout=2, inbound_limit=MB)
    sent = [arrow(i) for i in range(64)]
    errors: list = []
    t = sender(meshes[1].connections[0], 1, 0, sent, errors)
    time.sleep(5)
    assert not errors, f"the sender failed while its peer was busy but alive: {errors}"
    assert t.is_alive(), "the sender sent everything while the receiver took nothing: no back-pressure"
    got = take_all(meshes[0], fabrics[0].mailboxes[0], len(sent), time.monotonic() + 60)
    t.join(30)
    assert not errors and not t.is_alive()
    assert len(got) == len(sent) and all(same(a, b) for a, b in zip(got, sent))
    shut(meshes)
    assert all(f.failure is None for f in fabrics)
