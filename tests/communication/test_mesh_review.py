"""Review of the encrypted mesh: what a run leaves behind, what is read
before authentication on the event streams, and the handshake's binding of its mode."""

import os
import socket
import threading

import pytest

import timely_spark as ts
from timely_spark.communication.tcp import bind_listener
from timely_spark.process import run_process


def open_descriptors():
    return len(os.listdir("/proc/self/fd"))


def two_processes_in_threads(fn, **kw):
    """Both processes of a 2-process run inside this interpreter (threads), over real sockets."""
    listeners = [bind_listener() for _ in range(2)]
    addresses = [s.getsockname() for s in listeners]
    results, errors = [None, None], []

    def one(p):
        try:
            results[p] = run_process(fn, p, 2, 1, addresses, listeners[p], b"k", connect_timeout=20, **kw)
        except BaseException as exc:        # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(p,)) for p in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results, errors


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_a_run_over_the_mesh_leaves_no_descriptor_or_thread_behind():
    def work(worker):
        inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.exchange(lambda r: r).probe()))(*s.new_input()))
        inp.send_batch(list(range(10)))
        inp.close()
        worker.step_while(lambda: not probe.done(), timeout=30)
        return worker.index

    two_processes_in_threads(work)            # warm up (imports, lazily created descriptors)
    before = open_descriptors()
    threads_before = {t.ident for t in threading.enumerate()}
    for _ in range(3):
        results, errors = two_processes_in_threads(work)
        assert not errors and [r for rs in results for r in rs] == [0, 1]
    assert open_descriptors() == before
    left = [t.name for t in threading.enumerate() if t.ident not in threads_before and t.name.startswith("timely")]
    assert not left


def test_an_event_reader_refuses_an_oversized_announcement_before_buffering_it():
    from timely_spark.capture import EventReader
    from timely_spark.capture.stream_io import _PREFIX as PREFIX
    from timely_spark.capture.stream_io import MAX_EVENT_FRAME

    a, b = socket.socketpair()
    try:
        reader = EventReader(a, secret=b"k")
        b.recv(64)                                              # the reader's greeting
        b.sendall(PREFIX + b"A" + os.urandom(32))               # a greeting anyone can send...
        b.sendall((MAX_EVENT_FRAME + 1).to_bytes(8, "little"))  # ...announcing more than any event may hold
        b.sendall(bytes(1 << 16))
        with pytest.raises(ts.errors.EventStreamError, match=f"announced a frame of {MAX_EVENT_FRAME + 1} bytes"):
            for _ in range(100):
                reader.next()
    finally:
        a.close()
        b.close()


def test_arrow_payloads_are_encoded_without_copying_their_columns_and_decode_intact():
    import pyarrow as pa

    from timely_spark.communication.codec import ARROW, decode, encode

    big = pa.record_batch({"a": pa.array(range(100_000), pa.int64()),
                           "s": pa.array([None if i % 7 == 0 else str(i) for i in range(100_000)]),
                           "d": pa.array(["x", "y"] * 50_000).dictionary_encode()})
    sliced = big.slice(3, 50_001)                       # offsets: the writer must cut the buffers
    kind, parts = encode((("t", 5), [big, sliced]))
    assert kind == ARROW
    shared = {p.address for p in parts if isinstance(p, pa.Buffer)}
    assert big.column(0).buffers()[1].address in shared  # the column travels from its own memory
    time, batches = decode(kind, memoryview(b"".join(bytes(memoryview(p)) for p in parts)))
    assert time == ("t", 5) and batches[0].equals(big) and batches[1].equals(sliced)


def connector_reply(port, secret, magic=None, index=1, keep=None):
    """Connect to a mesh listener as process ``index`` and send a handshake reply proving
    ``secret`` (``magic``: the greeting to answer with; default: the listener's own).
    Returns the socket and the bytes sent."""
    import struct

    from timely_spark.communication.tcp import MAGIC, NONCE, handshake_mac

    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    hello = s.recv(len(MAGIC) + NONCE, socket.MSG_WAITALL)
    challenge = hello[len(MAGIC):]
    me, mine = struct.pack("<I", index), os.urandom(NONCE)
    sent = (magic or hello[:len(MAGIC)]) + me + mine + handshake_mac(secret, b"connect", challenge, me, mine)
    if keep is not None:
        keep.append(s)
        return s, sent
    s.sendall(sent)
    return s, sent


def listening_mesh():
    from timely_spark.communication.tcp import Mesh
    from timely_spark.communication.thread import ThreadFabric

    listener = bind_listener()
    port = listener.getsockname()[1]
    m = Mesh(0, [("127.0.0.1", port), ("127.0.0.1", 1)], listener, b"k", ThreadFabric(1), 1, connect_timeout=10)
    m.start_accepting()
    return m, port


def closed_by_peer(s, seconds=10):
    s.settimeout(seconds)
    try:
        return s.recv(64) == b""
    except ConnectionResetError:
        return True


def test_a_handshake_that_completes_after_the_mesh_shut_down_is_refused_not_leaked():
    m, port = listening_mesh()
    pending = []
    s, reply = connector_reply(port, b"k", keep=pending)     # greeted, its answer not sent yet
    m.shutdown(clean=False)
    s.sendall(reply)                                         # a valid answer, after the shutdown
    assert closed_by_peer(s)                                 # refused and closed: no connection outlives the mesh
    assert not m.connections
    s.close()


def test_a_recorded_handshake_replayed_and_a_downgrade_to_clear_frames_are_refused():
    from timely_spark.communication.tcp import mesh_magic

    m, port = listening_mesh()
    try:
        s, recorded = connector_reply(port, b"k", magic=mesh_magic(False))   # proves the secret, but asks for clear
        assert closed_by_peer(s)
        s.close()
        assert "does not encrypt its frames and this process does" in m.rejected[-1]     # named, refused
        assert not m.connections
        pending = []
        s, recorded = connector_reply(port, b"k", keep=pending)               # a genuine reply, recorded...
        s.close()
        t = socket.create_connection(("127.0.0.1", port), timeout=5)
        t.recv(40, socket.MSG_WAITALL)                                         # the greeting
        t.sendall(recorded)                                                    # ...replayed on a new connection
        assert closed_by_peer(t)
        t.close()
        assert "failed authentication" in m.rejected[-1]
        assert not m.connections
    finally:
        m.shutdown(clean=False)


def test_a_step_that_sends_thousands_of_small_messages_to_a_process_delivers_them_all_in_order():
    from timely_spark.communication.allocator import Inbox

    count = 3000                                    # gathered in one step: more buffers than one sendmsg takes

    def work(worker):
        inbox = Inbox(lambda: None)
        _, pushers = worker.allocate_channel(inbox)
        for i in range(count):
            pushers[1 - worker.index].push((0, [i]))
        worker.allocator.release()                  # the step's end: one write of everything gathered
        got = []
        while len(got) < count:
            worker.allocator.receive(1.0)
            while inbox.queue:
                got.extend(inbox.queue.popleft()[1])
        return got == list(range(count))

    results, errors = two_processes_in_threads(work)
    assert not errors, errors
    assert results == [[True], [True]]


@pytest.mark.slow
def test_a_peer_sending_a_lot_to_a_worker_busy_in_its_own_code_is_not_failed_as_stuck():
    import time

    from timely_spark.communication.allocator import Inbox

    chunk = bytes(16 << 20)                          # far more than the sockets' buffers hold

    def work(worker):
        inbox = Inbox(lambda: None)
        _, pushers = worker.allocate_channel(inbox)
        if worker.index == 0:
            for _ in range(2):
                pushers[1].push((0, [chunk]))
            worker.allocator.release()
            return "sent"
        time.sleep(4.5)                              # in its own code, longer than peer_timeout
        got = 0
        while got < 2:
            worker.allocator.receive(1.0)
            while inbox.queue:
                got += len(inbox.queue.popleft()[1][0]) == len(chunk)
        return "received"

    results, errors = two_processes_in_threads(work, peer_timeout=2.0)
    assert not errors, errors
    assert results == [["sent"], ["received"]]


def test_two_processes_sending_each_other_more_than_the_sockets_hold_at_once_both_finish():
    from timely_spark.communication.allocator import Inbox

    chunk = bytes(16 << 20)

    def work(worker):
        inbox = Inbox(lambda: None)
        _, pushers = worker.allocate_channel(inbox)
        for _ in range(2):
            pushers[1 - worker.index].push((0, [chunk]))    # both write before either reads
        worker.allocator.release()
        got = 0
        while got < 2:
            worker.allocator.receive(1.0)
            while inbox.queue:
                got += len(inbox.queue.popleft()[1][0]) == len(chunk)
        return got

    results, errors = two_processes_in_threads(work, peer_timeout=2.0)
    assert not errors, errors
    assert results == [[2], [2]]


@pytest.mark.slow
def test_a_process_finishing_long_after_its_peer_said_goodbye_and_closed_still_succeeds():
    import time

    def work(worker):
        if worker.index == 1:
            time.sleep(4.5)           # its own code, long after process 0 finished and (past peer_timeout) closed
        return worker.index

    results, errors = two_processes_in_threads(work, peer_timeout=2.0)
    assert not errors, errors
    assert results == [[0], [1]]


def test_a_heartbeat_sent_after_this_side_closed_its_sockets_fails_nothing():
    """The heartbeat thread may wake once more while its mesh closes (the peer still in
    its own code, no goodbye from it): the send meets a closed socket, and that is no
    failure of the run."""
    from timely_spark.communication.tcp import CONTROL, HEARTBEAT

    from .test_encryption import connected_pair

    meshes, fabrics = connected_pair(peer_timeout=10)
    conn = meshes[0].connections[1]
    meshes[0].shutdown(clean=False)                 # this side closes; the peer said no goodbye
    conn.send(CONTROL, 0, 0, HEARTBEAT, [b""])      # what the heartbeat thread would do
    assert fabrics[0].failure is None
    meshes[1].shutdown(clean=False)
