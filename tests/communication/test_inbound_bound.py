"""What a process reads ahead of its workers is bounded per peer (a receiver that does not
step holds its sender back instead of buffering without limit), and two processes flooding
each other past that bound on both sides still finish: a worker waiting for room to send
reads every connection past the bound.  Real sockets, meshes of one test process.  A
worker's steps release what it took (through the allocator), a frozen peer fails a sender
that waits while its connection is held, and heartbeats never wait behind a busy connection."""

import threading
import time

import numpy as np
import pyarrow as pa
import pytest

from timely_spark.communication.allocator import Inbox
from timely_spark.communication.codec import encode
from timely_spark.communication.tcp import Mesh, TcpAllocator
from timely_spark.communication.thread import ThreadFabric
from timely_spark.errors import WorkerFailure

from .test_encryption import bind_listener, connected_pair

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


def connected(threads, peer_timeout, wakeable=False, **kw):
    """Meshes of one test process, connected: ``threads[p]`` workers in process ``p``
    (numbered on from process to process), ``peer_timeout`` one for all or one a process."""
    n = len(threads)
    listeners = [bind_listener() for _ in range(n)]
    addresses = [s.getsockname() for s in listeners]
    timeouts = peer_timeout if isinstance(peer_timeout, list) else [peer_timeout] * n
    fabrics = [ThreadFabric(threads[p], offset=sum(threads[:p]), wakeable=wakeable) for p in range(n)]
    meshes = [Mesh(p, addresses, listeners[p], b"k", fabrics[p], threads[p], connect_timeout=10,
                   peer_timeout=timeouts[p], **kw) for p in range(n)]
    joins = [threading.Thread(target=m.connect) for m in meshes]
    for j in joins:
        j.start()
    for j in joins:
        j.join(20)
    assert all(len(m.connections) == n - 1 for m in meshes)
    return meshes, fabrics


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


def test_a_worker_stepping_through_its_allocator_releases_what_it_took_and_gets_everything():
    # The watchdog fills worker 0's mailbox up to the bound; the worker's own steps
    # (TcpAllocator.receive: drain, then read) release it, so the rest flows in too.
    meshes, fabrics = connected_pair(peer_timeout=30, inbound_limit=MB, wakeable=True)
    sent = [arrow(i) for i in range(16)]
    errors: list = []
    t = sender(meshes[1].connections[0], 1, 0, sent, errors)
    until = time.monotonic() + 30
    while meshes[0].read_ahead(1) < MB and time.monotonic() < until:
        time.sleep(0.01)                            # (only the watchdog reads: it stops at the bound)
    assert meshes[0].read_ahead(1) >= MB
    worker = TcpAllocator(0, fabrics[0], meshes[0], 2)
    inbox = Inbox(lambda: None)
    worker.allocate(7, inbox)
    until = time.monotonic() + 60
    while len(inbox.queue) < len(sent) and time.monotonic() < until:
        worker.receive(0.1)
    t.join(30)
    assert not errors and not t.is_alive()
    assert len(inbox.queue) == len(sent), "the worker's steps did not release the bound"
    assert all(same(a, b) for a, b in zip(inbox.queue, sent))
    assert meshes[0].read_ahead(1) == 0
    shut(meshes)
    assert all(f.failure is None for f in fabrics)


@pytest.mark.slow
def test_a_peer_frozen_while_a_worker_waits_to_send_to_it_fails_the_run_even_with_its_connection_held():
    # Process 1 floods worker 0 (its connection held at the bound), then freezes: it reads
    # nothing and sends nothing more (its locks held).  Worker 0 then waits for room to send
    # to it, reading every connection meanwhile: the silence is process 1's own, and fails
    # the run naming it -- the held connection must not pass for a peer heard from.
    meshes, fabrics = connected([1, 1], [2, 600], inbound_limit=MB)
    flood: list = []
    sender(meshes[1].connections[0], 1, 0, [arrow(i) for i in range(8)], flood).join(30)
    until = time.monotonic() + 30
    while meshes[0].read_ahead(1) < MB and time.monotonic() < until:
        time.sleep(0.01)
    frozen = meshes[1].connections[0]
    assert frozen.read_lock.acquire(timeout=10)     # process 1 reads nothing ...
    assert frozen.lock.acquire(timeout=10)          # ... and sends nothing (no heartbeat)
    try:
        until = time.monotonic() + 30
        while fabrics[0].mailboxes[0].qsize() < 8 and time.monotonic() < until:   # (what it sent before)
            meshes[0].read_all(force=True)
            time.sleep(0.01)
        errors: list = []
        t = sender(meshes[0].connections[1], 0, 1, [arrow(i) for i in range(64)], errors)
        t.join(60)
        assert not t.is_alive(), "a worker waiting to send to a frozen peer hangs"
        assert errors and fabrics[0].failure is not None
        assert isinstance(fabrics[0].failure[1], WorkerFailure) and "process 1" in str(fabrics[0].failure[1])
    finally:
        frozen.lock.release()
        frozen.read_lock.release()
        for m in meshes:
            m.shutdown(clean=False)


@pytest.mark.slow
def test_heartbeats_do_not_wait_behind_a_connection_a_worker_holds():
    # Process 0's worker holds its connection to process 1 (it waits to send to a peer that
    # does not read: its reading held); process 2 must still hear process 0's heartbeats.
    meshes, fabrics = connected([1, 1, 1], 2)
    busy = meshes[0].connections[1].lock
    held = meshes[1].connections[0].read_lock       # (process 1 reads nothing of process 0 meanwhile)
    assert held.acquire(timeout=10)
    assert busy.acquire(timeout=10)
    try:
        time.sleep(5)                               # two and a half of process 2's peer timeouts
        assert fabrics[2].failure is None, f"process 2 stopped hearing process 0: {fabrics[2].failure}"
        assert fabrics[0].failure is None
    finally:
        busy.release()
        held.release()
        for m in meshes:
            m.shutdown(clean=False)


@pytest.mark.slow
def test_an_idle_worker_does_not_spin_on_a_connection_held_for_its_busy_sibling():
    # Two workers a process: worker 0 computes (takes nothing) while process 1 floods it,
    # so the connection is held with bytes waiting in its socket.  Worker 1, idle, waits for
    # messages: the held socket is out of its poll set, so its waits wait.
    meshes, fabrics = connected([2, 2], 30, wakeable=True, inbound_limit=MB)
    errors: list = []
    t = sender(meshes[1].connections[0], 2, 0, [arrow(i) for i in range(16)], errors)
    try:
        until = time.monotonic() + 30
        while meshes[0].read_ahead(1) < MB and time.monotonic() < until:
            time.sleep(0.01)
        idle = TcpAllocator(1, fabrics[0], meshes[0], 4)
        idle.allocate(7, Inbox(lambda: None))
        waits = 0
        until = time.monotonic() + 2
        while time.monotonic() < until:
            idle.receive(1.0)
            waits += 1
        assert waits < 50, f"an idle worker woke {waits} times in 2 s on a held connection"
        assert meshes[0].read_ahead(1) >= MB        # (still held: worker 0 took nothing)
    finally:
        while not fabrics[0].mailboxes[0].empty():
            fabrics[0].mailboxes[0].get().release()
        shut(meshes)
    t.join(30)


@pytest.mark.slow
def test_two_busy_processes_holding_each_other_back_do_not_fail_the_run():
    # Busy both ways is not stuck: process 0 (worker 0 busy, worker 1 idle and parked) and
    # process 1 (busy) each take nothing while the other floods them past the bound, and
    # neither process reads past it.  Their writers wait on each other for four peer
    # timeouts; a held connection counts as heard whenever asked (its watchdog, slowed here
    # as on a loaded host, need not have come by), so nobody fails.  Then all arrives.
    meshes, fabrics = connected([2, 1], 2, wakeable=True, inbound_limit=MB)
    rnd = np.random.default_rng(0)
    for m in meshes:
        wait = m.stop_wait
        m.stop_wait = lambda s, wait=wait: wait(s + rnd.uniform(0, 0.1))     # the watchdogs wake late
    errors: list = []
    to_0 = [arrow(i) for i in range(12)]
    to_2 = [arrow(100 + i) for i in range(12)]
    senders = [sender(meshes[1].connections[0], 2, 0, to_0, errors),
               sender(meshes[0].connections[1], 0, 2, to_2, errors)]
    try:
        idle = TcpAllocator(1, fabrics[0], meshes[0], 3)
        idle.allocate(7, Inbox(lambda: None))
        until = time.monotonic() + 8
        while time.monotonic() < until and fabrics[0].failure is None and fabrics[1].failure is None:
            idle.receive(1.0)
        assert fabrics[0].failure is None and fabrics[1].failure is None, \
            f"a busy run failed: {fabrics[0].failure or fabrics[1].failure}"
        got_0 = take_all(meshes[0], fabrics[0].mailboxes[0], len(to_0), time.monotonic() + 60)
        got_2 = take_all(meshes[1], fabrics[1].mailboxes[0], len(to_2), time.monotonic() + 60)
        for t in senders:
            t.join(30)
        assert not errors and not any(t.is_alive() for t in senders)
        assert len(got_0) == len(to_0) and all(same(a, b) for a, b in zip(got_0, to_0))
        assert len(got_2) == len(to_2) and all(same(a, b) for a, b in zip(got_2, to_2))
    finally:
        shut(meshes)
