"""The mesh after the handshake: frames that someone on the path injects, alters, replays
or drops are refused (nothing is unpickled); both sides verify each other; frame sizes,
handshakes and the accept loop are bounded; a silent peer fails the run fast."""

import os
import pickle
import resource
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import timely_spark as ts
from timely_spark.communication.aead import TAG, Sealer
from timely_spark.communication.allocator import WAKE
from timely_spark.communication.codec import encode
from timely_spark.communication.tcp import (
    CONTROL,
    HEADER,
    INNER,
    MAC,
    MAGIC,
    MAX_HANDSHAKES,
    NONCE,
    Mesh,
    bind_listener,
    frame_keys,
    handshake_mac,
    recv_exact,
)
from timely_spark.communication.thread import ThreadFabric
from timely_spark.process import run_process

ROOT = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("mesh_job.py")
CONNECTOR_HELLO = len(MAGIC) + 4 + NONCE + MAC      # what the connecting side sends in the handshake


class Evil:
    """Unpickling this would create a file."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


class Proxy:
    """Relays a connection from process 1 to process 0; after the handshake it applies
    ``attack(frames)`` to the frames going to process 0 (a list of whole frames) until
    the attack says it is done: it returns ``(frames to pass on, done)``."""

    def __init__(self, target_port, attack):
        self.listener = bind_listener("127.0.0.1", 0)
        self.port = self.listener.getsockname()[1]
        self.target_port = target_port
        self.attack = attack
        self.attacked = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        self.listener.settimeout(60)
        client, _ = self.listener.accept()
        deadline = time.monotonic() + 30
        while True:                                    # process 0 may not listen yet
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline:
                    client.close()
                    return
                time.sleep(0.05)
        threading.Thread(target=self._pipe, args=(server, client), daemon=True).start()
        buf = b""
        handshake_left = CONNECTOR_HELLO
        try:
            while True:
                chunk = client.recv(1 << 16)
                if not chunk:
                    break
                buf += chunk
                if handshake_left:
                    n = min(handshake_left, len(buf))
                    server.sendall(buf[:n])
                    buf, handshake_left = buf[n:], handshake_left - n
                frames = []
                while len(buf) >= HEADER.size:
                    length = HEADER.unpack(buf[:HEADER.size])[-1]
                    size = HEADER.size + length + TAG
                    if len(buf) < size:
                        break
                    frames.append(buf[:size])
                    buf = buf[size:]
                if frames and not self.attacked.is_set():
                    frames, done = self.attack(frames)
                    if done:
                        self.attacked.set()
                server.sendall(b"".join(frames))
        except OSError:
            pass
        finally:
            server.close()
            client.close()

    @staticmethod
    def _pipe(src, dst):
        try:
            while True:
                chunk = src.recv(1 << 16)
                if not chunk:
                    break
                dst.sendall(chunk)
        except OSError:
            pass


def run_through_proxy(tmp_path, attack):
    socks = [bind_listener("127.0.0.1", 0) for _ in range(2)]
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    proxy = Proxy(ports[0], attack)
    (tmp_path / "hosts0").write_text(f"127.0.0.1:{ports[0]}\n127.0.0.1:{ports[1]}\n")
    (tmp_path / "hosts1").write_text(f"127.0.0.1:{proxy.port}\n127.0.0.1:{ports[1]}\n")
    env = dict(os.environ, TIMELY_SPARK_SECRET="s3cret", PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, str(JOB), "-n", "2", "-p", str(p), "-w", "1",
                               "-h", str(tmp_path / f"hosts{p}"), "--peer-timeout", "5", "--timeout", "40"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for p in (0, 1)]
    outs = [p.communicate(timeout=90) for p in procs]
    assert proxy.attacked.is_set(), "the proxy saw no frame to attack"
    return procs, outs


def forged(marker):
    bomb = INNER.pack(CONTROL, 0, 0, 0, 12) + pickle.dumps(Evil(str(marker)))     # a control ERROR frame
    return HEADER.pack(len(bomb)) + bomb + os.urandom(TAG)


def is_data(frame):
    """Not a heartbeat or a goodbye (those seal an empty payload: the inner header alone)."""
    (length,) = HEADER.unpack(frame[:HEADER.size])
    return length > INNER.size


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["inject", "flip", "replay", "drop"])
def test_frames_tampered_with_on_the_path_fail_the_run(tmp_path, how):
    marker = tmp_path / "pwned"

    def attack(frames):
        if how == "inject":
            return [forged(marker)] + frames, True
        data = [i for i, f in enumerate(frames) if is_data(f)]
        if not data:                                                      # heartbeats only: wait for data
            return frames, False
        i = data[0]
        if how == "flip":
            frame = bytearray(frames[i])
            frame[HEADER.size + (len(frame) - HEADER.size - TAG) // 2] ^= 0x01    # one bit of the payload
            return frames[:i] + [bytes(frame)] + frames[i + 1:], True
        if how == "replay":
            return frames[:i + 1] + [frames[i]] + frames[i + 1:], True
        return frames[:i] + frames[i + 1:], True                          # drop

    procs, outs = run_through_proxy(tmp_path, attack)
    assert procs[0].returncode != 0
    assert "integrity check" in outs[0][1] and "process 1" in outs[0][1], outs[0][1][-2000:]
    assert not marker.exists()


def handshake_as_connector(port, secret, index=1):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    challenge = s.recv(len(MAGIC) + NONCE)[len(MAGIC):]
    me, mine = struct.pack("<I", index), os.urandom(NONCE)
    s.sendall(MAGIC + me + mine + handshake_mac(secret, b"connect", challenge, me, mine))
    answer = s.recv(MAC)
    return s, challenge, mine, answer


def mesh(process, addresses, listener, **kw):
    fabric = ThreadFabric(1, offset=process)
    m = Mesh(process, addresses, listener, b"k", fabric, 1, **kw)
    return m, fabric


def test_an_impostor_listener_without_the_secret_is_refused_by_the_connecting_side():
    impostor = bind_listener("127.0.0.1", 0)
    port = impostor.getsockname()[1]

    def pretend():
        s, _ = impostor.accept()
        s.sendall(MAGIC + os.urandom(NONCE))          # a valid greeting...
        s.recv(CONNECTOR_HELLO)
        s.sendall(os.urandom(MAC))                     # ...and an answer it cannot compute
        time.sleep(1)
        s.close()

    threading.Thread(target=pretend, daemon=True).start()
    listener = bind_listener("127.0.0.1", 0)
    m, _ = mesh(1, [("127.0.0.1", port), listener.getsockname()], listener, connect_timeout=10)
    with pytest.raises(ts.WorkerFailure, match=f"127.0.0.1:{port}.*did not prove the run's secret"):
        m.connect()
    m.shutdown(clean=False)


def test_a_peer_claiming_an_index_out_of_range_is_refused():
    listener = bind_listener()
    port = listener.getsockname()[1]
    m, _ = mesh(1, [("127.0.0.1", 1), ("127.0.0.1", port), ("127.0.0.1", 2)], listener, connect_timeout=3)
    m.start_accepting()
    for index in (0, 1, 3):                            # <= its own, or >= n
        s, _, _, answer = handshake_as_connector(port, b"k", index)
        assert answer == b""
        s.close()
    deadline = time.monotonic() + 5
    while sum("not expected here" in r for r in m.rejected) < 3:
        assert time.monotonic() < deadline, m.rejected
        time.sleep(0.02)
    m.shutdown(clean=False)


def test_a_silent_peer_fails_the_run_within_its_peer_timeout():
    raw = bind_listener("127.0.0.1", 0)
    port = raw.getsockname()[1]
    stop = threading.Event()

    def silent_acceptor():                             # completes the handshake, then says nothing
        s, _ = raw.accept()
        challenge = os.urandom(NONCE)
        s.sendall(MAGIC + challenge)
        hello = s.recv(CONNECTOR_HELLO)
        theirs = hello[len(MAGIC) + 4:len(MAGIC) + 4 + NONCE]
        s.sendall(handshake_mac(b"k", b"accept", theirs, challenge, struct.pack("<I", 0)))
        stop.wait(30)
        s.close()

    threading.Thread(target=silent_acceptor, daemon=True).start()
    listener = bind_listener("127.0.0.1", 0)
    m, fabric = mesh(1, [("127.0.0.1", port), listener.getsockname()], listener, peer_timeout=1.0, connect_timeout=10)
    start = time.monotonic()
    m.connect()
    while fabric.failure is None and time.monotonic() - start < 5:
        time.sleep(0.05)
    stop.set()
    m.shutdown(clean=False)
    assert fabric.failure is not None, "a peer silent for 5 s did not fail the run (its peer_timeout is 1 s)"
    assert "went silent for 1.0 s" in str(fabric.failure[1])
    assert time.monotonic() - start < 5


def accepting_mesh(**kw):
    """Process 0 of 2, accepting; returns the mesh, its fabric and the connector's socket
    and frame key after a real handshake as process 1."""
    listener = bind_listener()
    port = listener.getsockname()[1]
    m, fabric = mesh(0, [("127.0.0.1", port), ("127.0.0.1", 1)], listener, connect_timeout=10, **kw)
    t = threading.Thread(target=m.connect, daemon=True)
    t.start()
    s, challenge, mine, answer = handshake_as_connector(port, b"k")
    t.join(timeout=10)
    assert 1 in m.connections
    send_key, _ = frame_keys(b"k", challenge, mine)
    return m, fabric, s, send_key


def wait_for_failure(fabric, seconds=10):
    deadline = time.monotonic() + seconds
    while fabric.failure is None:
        assert time.monotonic() < deadline, "the connection was not failed"
        time.sleep(0.02)
    return str(fabric.failure[1])


def test_a_frame_from_another_connection_of_the_same_secret_is_refused():
    m1, fabric1, s1, key1 = accepting_mesh()
    m2, fabric2, s2, key2 = accepting_mesh()
    assert key1 != key2                                # keys are per connection (and so per run)
    body = INNER.pack(CONTROL, 0, 0, 0, 12) + pickle.dumps(ts.WorkerFailure("an error sent on connection 1"))
    header = HEADER.pack(len(body))                                      # a control ERROR frame
    frame = header + b"".join(bytes(p) for p in Sealer(key1).seal(header, [body]))
    s1.sendall(frame)                                  # authentic on connection 1: acted on there
    assert "an error sent on connection 1" in wait_for_failure(fabric1)
    s2.sendall(frame)                                  # replayed on connection 2: refused
    failure = wait_for_failure(fabric2)
    assert "integrity check" in failure and "process 1" in failure
    for m, s in ((m1, s1), (m2, s2)):
        s.close()
        m.shutdown(clean=False)


def test_an_oversized_frame_announcement_fails_the_connection_before_allocating():
    m, fabric, s, send_key = accepting_mesh()
    header = HEADER.pack(2 << 30)                      # 2 GiB announced: refused before reading (or allocating) it
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    s.sendall(header + bytes(64))
    failure = wait_for_failure(fabric)
    assert "announced a frame of 2147483648 bytes" in failure and "process 1" in failure
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000     # KiB: nothing like 2 GiB
    s.close()
    m.shutdown(clean=False)


def test_handshakes_in_flight_are_bounded_by_dropping_the_oldest_and_the_real_peer_gets_in():
    listener = bind_listener()
    port = listener.getsockname()[1]
    m, _ = mesh(0, [("127.0.0.1", port), ("127.0.0.1", 1)], listener, handshake_timeout=20, connect_timeout=20)
    t = threading.Thread(target=m.connect, daemon=True)
    t.start()
    idle = []
    for _ in range(MAX_HANDSHAKES):                    # each holds a handshake slot, saying nothing
        c = socket.create_connection(("127.0.0.1", port), timeout=5)
        assert c.recv(len(MAGIC) + NONCE)[:len(MAGIC)] == MAGIC
        idle.append(c)
    extra = socket.create_connection(("127.0.0.1", port), timeout=5)
    assert extra.recv(len(MAGIC) + NONCE)[:len(MAGIC)] == MAGIC     # admitted...
    assert idle[0].recv(1) == b""                      # ...by dropping the oldest of the busiest source
    assert any(f"dropped its oldest handshake (over {MAX_HANDSHAKES}" in r for r in m.rejected)
    s, _, _, answer = handshake_as_connector(port, b"k")     # the newest: admitted, it completes
    assert answer
    t.join(timeout=10)
    assert 1 in m.connections
    for c in idle + [extra, s]:
        c.close()
    m.shutdown(clean=False)


@pytest.mark.slow
def test_a_connecting_process_whose_handshake_is_closed_connects_again_until_its_deadline():
    """Process 1's first connection is accepted and closed before any greeting (as a
    listener dropping a pending handshake does): it connects again and gets in."""
    listeners = [bind_listener() for _ in range(2)]
    addresses = [s.getsockname()[:2] for s in listeners]
    meshes = [mesh(p, addresses, listeners[p], connect_timeout=30)[0] for p in range(2)]
    failures = []

    def connect(m):
        try:
            m.connect()
        except ts.WorkerFailure as exc:
            failures.append(exc)

    connector = threading.Thread(target=connect, args=(meshes[1],), daemon=True)
    connector.start()
    listeners[0].settimeout(20)
    dropped, _ = listeners[0].accept()                 # process 1's first attempt...
    dropped.close()                                    # ...closed before its handshake
    acceptor = threading.Thread(target=connect, args=(meshes[0],), daemon=True)
    acceptor.start()
    connector.join(timeout=40)
    acceptor.join(timeout=40)
    assert not failures, failures
    assert 0 in meshes[1].connections and 1 in meshes[0].connections
    for m in meshes:
        m.shutdown(clean=False)


def test_a_listener_remembers_only_its_latest_refusals():
    from timely_spark.communication.tcp import REJECTIONS_KEPT

    listener = bind_listener()
    port = listener.getsockname()[1]
    m, _ = mesh(0, [("127.0.0.1", port), ("127.0.0.1", 1)], listener, connect_timeout=30)
    m.start_accepting()
    for i in range(REJECTIONS_KEPT + 20):             # each proves nothing and is refused
        c = socket.create_connection(("127.0.0.1", port), timeout=5)
        c.recv(len(MAGIC) + NONCE, socket.MSG_WAITALL)
        c.sendall(b"x" * CONNECTOR_HELLO)
        assert c.recv(1) == b""
        c.close()
    deadline = time.monotonic() + 10
    while "bad greeting" not in (m.rejected[-1] if m.rejected else ""):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert len(m.rejected) == REJECTIONS_KEPT
    m.shutdown(clean=False)


IDLE_CONNECTIONS = 40


@pytest.mark.timeout(120)
def test_idle_connections_filling_a_listener_do_not_fail_the_run():
    """40 idle connections to process 0's listener, made before the run starts (they wait
    in its backlog ahead of process 1's): the run completes on both processes, its
    exchange intact -- the listener drops the oldest idle handshakes, and process 1 tries
    again if its own handshake is dropped."""
    listeners = [bind_listener() for _ in range(2)]
    addresses = [s.getsockname()[:2] for s in listeners]
    idle = [socket.create_connection(addresses[0], timeout=5) for _ in range(IDLE_CONNECTIONS)]

    def work(worker):
        out = []
        probe = worker.dataflow(lambda scope: scope.to_stream(range(worker.index * 10, worker.index * 10 + 10))
                                .exchange(lambda x: x).inspect(out.append).probe())
        worker.step_while(lambda: not probe.done())
        return sorted(out)

    results, errors = {}, []

    def run(p):
        try:
            results[p], = run_process(work, p, 2, 1, addresses, listeners[p], b"k", connect_timeout=60, timeout=90)
        except BaseException as exc:  # noqa: BLE001 -- the test reports it
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(p,), daemon=True) for p in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=100)
    for c in idle:
        c.close()
    assert not errors, errors
    assert sorted(results[0] + results[1]) == list(range(20))
    assert results[0] == [x for x in range(20) if x % 2 == 0]


def test_a_slow_handshake_is_dropped_at_its_deadline():
    listener = bind_listener()
    port = listener.getsockname()[1]
    m, _ = mesh(0, [("127.0.0.1", port), ("127.0.0.1", 1)], listener, handshake_timeout=1.0, connect_timeout=5)
    m.start_accepting()
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.recv(len(MAGIC) + NONCE)
    start = time.monotonic()
    closed = False
    while time.monotonic() - start < 5:                # one byte every 0.3 s: each read is quick
        try:
            s.sendall(b"x")
            s.settimeout(0.3)
            if s.recv(1) == b"":
                closed = True
                break
        except socket.timeout:
            continue
        except OSError:
            closed = True
            break
    assert closed and time.monotonic() - start < 3
    assert any("not done within 1.0 s" in r for r in m.rejected)
    m.shutdown(clean=False)


ACCEPT_UNDER_PRESSURE = r"""
import resource, socket, sys, threading, time
from timely_spark.communication.tcp import Mesh, bind_listener
from timely_spark.communication.thread import ThreadFabric
from timely_spark.communication.tcp import MAX_HANDSHAKES

listener = bind_listener()
port = listener.getsockname()[1]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
m = Mesh(0, [("127.0.0.1", port), ("127.0.0.1", 1)], listener, b"k", ThreadFabric(1), 1, connect_timeout=20)
t = threading.Thread(target=m.connect, daemon=True)
t.start()
hog = []
try:
    while True:
        hog.append(open("/dev/null"))        # exhaust the descriptors: accept() fails with EMFILE
except OSError:
    pass
print("PORT", port, flush=True)
sys.stdin.readline()                      # the parent has connected meanwhile
for f in hog:
    f.close()
t.join(timeout=20)
print("CONNECTED", sorted(m.connections), flush=True)
"""


@pytest.mark.timeout(60)
def test_the_accept_loop_survives_descriptor_exhaustion_and_accepts_the_real_peer(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", ACCEPT_UNDER_PRESSURE], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    line = proc.stdout.readline()
    assert line.startswith("PORT"), proc.stderr.read()
    port = int(line.split()[1])
    pending = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
    time.sleep(1.0)                                    # accept() fails meanwhile, and backs off
    proc.stdin.write("go\n")
    proc.stdin.flush()
    s, _, _, answer = handshake_as_connector(port, b"k")
    out, err = proc.communicate(timeout=40)
    s.close()
    for p in pending:
        p.close()
    assert "CONNECTED [1]" in out, err
    assert "accept failed" in err


def delivered(fabric):
    """The messages waiting in the mailbox of the fabric's one worker."""
    got = []
    while not fabric.mailboxes[0].empty():
        item = fabric.mailboxes[0].get()
        if item is not WAKE:
            got.append(item)
    return got


def test_a_receiver_refuses_frames_past_its_own_nonce_limit_whatever_the_sender_allows():
    """The receiving mesh's limit is 12 frames; the sender (a sealer of the connection's
    key that would go on to 2**48) sends 13: 12 are delivered, the 13th fails the
    connection instead of being opened under a key past its limit."""
    limit = 12
    m, fabric, s, send_key = accepting_mesh(frame_limit=limit, peer_timeout=600)    # no heartbeat meanwhile
    sealer = Sealer(send_key)
    assert sealer.limit > limit
    kind, parts = encode((0, ["hello"]))
    for seq in range(limit + 1):
        body = INNER.pack(7, 1, 0, seq, kind) + b"".join(bytes(p) for p in parts)
        header = HEADER.pack(len(body))
        s.sendall(header + b"".join(bytes(p) for p in sealer.seal(header, [body])))
    failure = wait_for_failure(fabric)
    assert "integrity check" in failure and "process 1" in failure
    assert delivered(fabric) == [(7, (0, ["hello"]))] * limit
    s.close()
    m.shutdown(clean=False)


def test_a_frame_reflected_back_to_its_sender_fails_its_tag():
    """The two directions of a connection have their own keys: a frame of process 0's,
    sent back to it by someone on the path (same connection, same frame number), is
    refused, not taken for one of process 1's."""
    m, fabric, s, _ = accepting_mesh(peer_timeout=600)
    kind, parts = encode((0, ["to worker 1"]))
    m.connections[1].send(7, 0, 1, kind, parts)
    s.settimeout(10)
    header = bytes(recv_exact(s, HEADER.size))
    (length,) = HEADER.unpack(header)
    s.sendall(header + bytes(recv_exact(s, length + TAG)))            # back where it came from
    failure = wait_for_failure(fabric)
    assert "integrity check" in failure and "process 1" in failure
    assert delivered(fabric) == []
    s.close()
    m.shutdown(clean=False)
