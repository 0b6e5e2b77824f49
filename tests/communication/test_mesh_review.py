"""Review of the encrypted mesh (issue 26): what a run leaves behind, what is read
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


def two_processes_in_threads(fn):
    """Both processes of a 2-process run inside this interpreter (threads), over real sockets."""
    listeners = [bind_listener() for _ in range(2)]
    addresses = [s.getsockname() for s in listeners]
    results, errors = [None, None], []

    def one(p):
        try:
            results[p] = run_process(fn, p, 2, 1, addresses, listeners[p], b"k", connect_timeout=20)
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
    from timely_spark.runtime import MAX_EVENT_FRAME

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
