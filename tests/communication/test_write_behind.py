"""Bulk messages leave through a writer thread per connection: its queue stays within its
bound (the sender waits, reading meanwhile), frames keep their order, a peer that dies
mid-stream fails the run naming it (never a hang), and the threads end with the mesh."""

import hashlib
import os
import signal
import socket
import threading
import time

import numpy as np
import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.communication.buffer_pool import BufferPool
from timely_spark.communication.codec import encode
from timely_spark.communication.write_behind import WriteBehind

from .test_encryption import connected_pair


def tcp_pair():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        a = socket.create_connection(listener.getsockname())
        b, _ = listener.accept()
    for s in (a, b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    return a, b


def writer_threads():
    return [t for t in threading.enumerate() if t.name.startswith("timely-write") and t.is_alive()]


def test_the_queue_stays_within_its_bound_while_the_peer_reads_nothing_then_all_arrives_in_order():
    a, b = tcp_pair()
    errors = []
    behind = WriteBehind(a, "timely-write-test", timeout=30, on_error=errors.append, limit=1 << 20)
    chunk = 256 * 1024
    sent = hashlib.sha256()
    peak = 0
    held = []

    def give_up():                                  # the sender is held: the peer took nothing for a while
        if time.monotonic() > hold_until:
            held.append(behind.queued)
            raise TimeoutError("held")

    hold_until = time.monotonic() + 1.0
    pieces = 0
    with pytest.raises(TimeoutError):
        while True:
            data = os.urandom(chunk)
            behind.wait_room(chunk, lambda: None, give_up)
            behind.put([data], chunk)
            sent.update(data)
            pieces += 1
            peak = max(peak, behind.queued)
            assert pieces < 1000, "the queue took everything: no back-pressure"
    assert peak <= 1 << 20 and held and held[0] > (1 << 20) - chunk     # full, and not over its bound
    got = hashlib.sha256()
    left = pieces * chunk
    b.settimeout(30)
    while left:
        part = b.recv(min(left, 1 << 20))
        got.update(part)
        left -= len(part)
    assert got.digest() == sent.digest() and not errors
    behind.close(drain=5)
    assert not behind.alive() and not writer_threads()
    a.close()
    b.close()


def test_a_write_that_fails_reports_once_and_the_next_wait_raises():
    a, b = tcp_pair()
    errors = []
    behind = WriteBehind(a, "timely-write-test", timeout=30, on_error=errors.append, limit=1 << 20)
    b.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")   # close with a reset
    b.close()
    with pytest.raises(OSError):
        for _ in range(100):
            behind.wait_room(1 << 16, lambda: None, lambda: None)
            behind.put([bytes(1 << 16)], 1 << 16)
            time.sleep(0.01)
    assert len(errors) == 1 and isinstance(errors[0], OSError)
    behind.close()
    assert not behind.alive()
    a.close()


def test_a_buffer_is_taken_again_only_once_nothing_refers_to_it():
    pool = BufferPool(8 << 20)
    first = pool.take(4 << 20)
    first[:4] = b"keep"
    batch = pa.py_buffer(first)                      # an Arrow buffer made from it, as a received payload is
    del first
    second = pool.take(4 << 20)
    second[:4] = b"over"
    assert bytes(batch[:4]) == b"keep"              # the buffer in use was not handed out again
    del batch, second
    again = pool.take(4 << 20)
    assert pool.allocated == 2 and bytes(again[:4]) in (b"keep", b"over")     # reused, not allocated


def test_a_full_pool_drops_free_buffers_to_keep_a_larger_one_and_never_one_in_use():
    pool = BufferPool(8 << 20)
    a, b = pool.take(3 << 20), pool.take(3 << 20)
    del a, b                                         # both free, too small for what comes
    c = pool.take(5 << 20)                           # the oldest free one is dropped to keep it
    assert pool.allocated == 3 and pool.held == 8 << 20
    d = pool.take(5 << 20)                           # the other free one goes; ``c`` is in use: ``d`` not kept
    assert pool.allocated == 4 and pool.held == 5 << 20
    c[:1] = b"c"
    d[:1] = b"d"
    assert bytes(c[:1]) == b"c"


def bulk(i, mb=2):
    rows = mb * (1 << 20) // 8
    return (i, [pa.record_batch({"x": pa.array(np.arange(i, i + rows))})])


def test_bulk_and_small_messages_keep_their_order_and_the_writer_threads_end_with_the_mesh():
    meshes, fabrics = connected_pair(peer_timeout=10)
    conn = meshes[1].connections[0]
    sent = []
    for i in range(24):                             # ~48 MB: more than the write-behind queue holds
        payload = bulk(i) if i % 3 else (i, [f"small {i}"])
        kind, parts = encode(payload)
        conn.send(7, 1, 0, kind, parts, gather=i % 2 == 0)
        sent.append(payload)
    conn.flush()
    assert writer_threads()                         # the bulk went through the connection's writer thread
    got = []
    deadline = time.monotonic() + 60
    while len(got) < len(sent) and time.monotonic() < deadline:
        meshes[0].pump()
        while not fabrics[0].mailboxes[0].empty():
            got.append(fabrics[0].mailboxes[0].get()[1])
    assert [t for t, _ in got] == list(range(24))
    for (t, data), (t2, data2) in zip(got, sent):
        assert t == t2 and (data == data2 if isinstance(data2[0], str) else data[0].equals(data2[0]))
    ends = [threading.Thread(target=m.shutdown, args=(True,)) for m in meshes]
    for t in ends:
        t.start()
    for t in ends:
        t.join(30)
    assert not writer_threads() and all(f.failure is None for f in fabrics)


def test_a_peer_gone_while_bulk_is_queued_fails_the_sender_naming_it_and_its_threads_end():
    meshes, fabrics = connected_pair(peer_timeout=10)
    conn = meshes[1].connections[0]
    kind, parts = encode(bulk(0, mb=4))
    meshes[0].shutdown(clean=False)                 # the peer goes away; the sender keeps sending bulk
    start = time.monotonic()
    with pytest.raises(ts.WorkerFailure, match="process 0"):
        for _ in range(200):
            conn.send(7, 1, 0, kind, parts)
    assert time.monotonic() - start < 30
    assert "process 0" in str(fabrics[1].failure[1])
    meshes[1].shutdown(clean=False)
    assert not writer_threads()


@pytest.mark.timeout(120)
def test_a_process_killed_mid_stream_fails_the_other_naming_it_never_a_hang():
    def work(worker):
        rows = (4 << 20) // 8
        rb = pa.record_batch({"x": pa.array(np.arange(rows))})
        got = [0]

        def build(scope):
            inp, stream = scope.new_input()
            return inp, stream.exchange(lambda b: worker.index + 1).inspect(
                lambda b: got.__setitem__(0, got[0] + 1)).probe()

        inp, probe = worker.dataflow(build)
        for i in range(400):                        # 1.6 GB each way if nobody died
            inp.send_batch([rb])
            worker.step()
            if worker.index == 1 and got[0] >= 3:
                os.kill(os.getpid(), signal.SIGKILL)
        inp.close()
        worker.step_while(lambda: not probe.done(), timeout=60)

    start = time.monotonic()
    with pytest.raises(ts.WorkerFailure) as err:
        ts.execute(work, processes=2, peer_timeout=30)
    assert "process 1" in str(err.value)
    assert time.monotonic() - start < 90
