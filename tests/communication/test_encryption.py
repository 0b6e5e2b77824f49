"""What a recorder of the wires learns: nothing of the payloads (the mesh between two real
processes, an event stream over TCP, the driver rendezvous), unless encryption is turned
off for a trusted network; and a connection that would reuse a nonce closes instead."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.capture import EventReader, EventWriter, Messages
from timely_spark.communication.codec import PICKLE, encode
from timely_spark.communication.tcp import Mesh, bind_listener
from timely_spark.communication.thread import ThreadFabric

sys.path.insert(0, str(Path(__file__).parent))
from secret_job import COLUMN, MARKER  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("secret_job.py")
COLUMN_BYTES = pa.array(COLUMN, pa.int64()).buffers()[1].to_pybytes()[:64]     # 8 values as they sit in memory


class Recorder:
    """A TCP proxy to ``127.0.0.1:target``: relays every connection both ways, recording
    every byte that passes."""

    def __init__(self, target):
        self.listener = bind_listener("127.0.0.1", 0)
        self.port = self.listener.getsockname()[1]
        self.target = target
        self.captured = bytearray()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            deadline = time.monotonic() + 30
            while True:                                    # the target may not listen yet
                try:
                    server = socket.create_connection(("127.0.0.1", self.target), timeout=5)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        client.close()
                        return
                    time.sleep(0.05)
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src, dst):
        try:
            while True:
                chunk = src.recv(1 << 16)
                if not chunk:
                    break
                with self._lock:
                    self.captured += chunk
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.listener.close()


def run_recorded(tmp_path, env_extra):
    probes = [bind_listener("127.0.0.1", 0) for _ in range(2)]      # held while the recorder binds: 3 ports
    ports = [s.getsockname()[1] for s in probes]
    recorder = Recorder(ports[0])
    for s in probes:
        s.close()
    (tmp_path / "hosts0").write_text(f"127.0.0.1:{ports[0]}\n127.0.0.1:{ports[1]}\n")
    (tmp_path / "hosts1").write_text(f"127.0.0.1:{recorder.port}\n127.0.0.1:{ports[1]}\n")
    env = dict(os.environ, TIMELY_SPARK_SECRET="s3cret", PYTHONPATH=str(ROOT), **env_extra)
    procs = [subprocess.Popen([sys.executable, str(JOB), "-n", "2", "-p", str(p), "-w", "1",
                               "-h", str(tmp_path / f"hosts{p}"), "--timeout", "60"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for p in (0, 1)]
    outs = [p.communicate(timeout=90) for p in procs]
    recorder.close()
    assert [p.returncode for p in procs] == [0, 0], "\n".join(f"process {i}:\n{err[-3000:]}"
                                                             for i, (_, err) in enumerate(outs))
    received = json.loads(outs[1][0].strip().splitlines()[-1])[0]
    assert received == {"marker": True, "column": True}, received      # the payloads did cross the recorder
    return bytes(recorder.captured)


@pytest.mark.timeout(120)
def test_a_recorder_between_two_processes_sees_no_payload_unless_encryption_is_off(tmp_path):
    captured = run_recorded(tmp_path, {})
    assert len(captured) > len(COLUMN) * 8                               # it recorded the run
    assert MARKER.encode() not in captured
    assert COLUMN_BYTES not in captured
    clear = run_recorded(tmp_path, {"TIMELY_SPARK_ENCRYPTION": "off"})   # trusted network: authenticated only
    assert MARKER.encode() in clear
    assert COLUMN_BYTES in clear


@pytest.mark.timeout(120)
@pytest.mark.parametrize("acceptor_encrypts", [True, False])
def test_processes_that_disagree_about_encryption_both_fail_at_once_saying_why(acceptor_encrypts):
    """Both sides name the mismatch: the connecting one from the greeting, the accepting
    one from the connector's proof in the other mode -- not by waiting out its connect
    timeout (60 s here, longer than the test waits) and blaming a missing connection."""
    listeners = [bind_listener() for _ in range(2)]
    addresses = [s.getsockname() for s in listeners]
    meshes = [Mesh(p, addresses, listeners[p], b"k", ThreadFabric(1, offset=p), 1, connect_timeout=60,
                   encrypt=(p == 0) == acceptor_encrypts) for p in range(2)]
    accepted: list = []

    def accept():
        try:
            meshes[0].connect()
        except ts.WorkerFailure as exc:
            accepted.append(exc)

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    said, other = ("encrypts", "does not") if acceptor_encrypts else ("does not encrypt", "does")
    with pytest.raises(ts.WorkerFailure, match=f"process 0 .* {said} its frames and this process {other}:"):
        meshes[1].connect()
    acceptor.join(timeout=30)
    said, other = ("does not encrypt", "does") if acceptor_encrypts else ("encrypts", "does not")
    assert accepted and f"process 1 at {addresses[1][0]}:{addresses[1][1]} {said} its frames and this process " \
        f"{other}: set TIMELY_SPARK_ENCRYPTION" in str(accepted[0]), accepted
    for m in meshes:
        m.shutdown(clean=False)


def connected_pair(listeners=None, wakeable=False, **kw):
    listeners = listeners or [bind_listener() for _ in range(2)]
    addresses = [s.getsockname() for s in listeners]
    fabrics = [ThreadFabric(1, offset=p, wakeable=wakeable) for p in range(2)]
    meshes = [Mesh(p, addresses, listeners[p], b"k", fabrics[p], 1, connect_timeout=10, **kw) for p in range(2)]
    threads = [threading.Thread(target=m.connect) for m in meshes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert all(len(m.connections) == 1 for m in meshes)
    return meshes, fabrics


def test_a_connection_closes_before_its_frame_counter_would_reuse_a_nonce():
    limit = 12
    meshes, fabrics = connected_pair(frame_limit=limit)
    conn = meshes[1].connections[0]
    kind, parts = encode((0, ["hello"]))
    assert kind == PICKLE
    for _ in range(limit):                          # frames 0 .. limit-1: each nonce once
        conn.send(7, 1, 0, kind, parts)
    with pytest.raises(ts.errors.FrameLimitReached, match=f"process 0 .*sealed {limit} frames"):
        conn.send(7, 1, 0, kind, parts)
    assert isinstance(fabrics[1].failure[1], ts.errors.FrameLimitReached)
    arrived = [fabrics[0].mailboxes[0].get(timeout=10) for _ in range(limit)]
    assert arrived == [(7, (0, ["hello"]))] * limit
    for m in meshes:
        m.shutdown(clean=False)


def test_an_event_stream_over_tcp_shows_a_recorder_nothing_unless_encryption_is_off(monkeypatch):
    def stream(env):
        if env:
            monkeypatch.setenv("TIMELY_SPARK_ENCRYPTION", "off")
        listener = bind_listener()
        recorder = Recorder(listener.getsockname()[1])

        def send():
            with socket.create_connection(("127.0.0.1", recorder.port)) as sock:
                w = EventWriter(sock, secret="s")
                w.push(Messages(0, [MARKER]))
                w.close()
                sock.recv(1)                         # until the reader closes

        sender = threading.Thread(target=send)
        sender.start()
        sock, _ = listener.accept()
        reader = EventReader(sock, secret="s")
        got = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                event = reader.next()
            except StopIteration:
                break
            if event is not None:
                got.append(event)
            else:
                time.sleep(0.001)
        sock.close()
        sender.join(10)
        listener.close()
        recorder.close()
        monkeypatch.delenv("TIMELY_SPARK_ENCRYPTION", raising=False)
        assert got == [Messages(0, [MARKER])]
        return bytes(recorder.captured)

    assert MARKER.encode() not in stream(env=False)
    assert MARKER.encode() in stream(env=True)


def test_the_driver_rendezvous_shows_a_recorder_no_address_or_error():
    from timely_spark.spark.rendezvous import DriverRendezvous, Ticket, meet, report_failure

    service = DriverRendezvous("127.0.0.1")
    recorder = Recorder(service.port)
    ticket = service.open(b"k" * 32, wait=20)
    via = Ticket("127.0.0.1", recorder.port, ticket.token, ticket.secret, ticket.wait, ticket.job)
    addresses, _ = meet(via, 1, 0, 0, 1, MARKER, 4242)
    assert addresses == [(MARKER, 4242)]
    report_failure(via, 1, 0, ValueError(MARKER + " in an error"))
    service.close(ticket)
    recorder.close()
    assert len(recorder.captured) > 100
    assert MARKER.encode() not in bytes(recorder.captured)


@pytest.mark.slow
def test_large_messages_and_messages_split_in_several_frames_arrive_intact():
    meshes, fabrics = connected_pair(max_frame=1 << 20)       # 1 MiB frames: a 3 MiB message goes in 4
    conn = meshes[1].connections[0]
    batch = pa.record_batch({"x": pa.array(range(3 << 17), pa.int64())})      # 3 MiB of values
    for payload in [(1, [batch]), (2, [bytes(range(256)) * 4096]), (3, [batch])]:
        kind, parts = encode(payload)
        conn.send(9, 1, 0, kind, parts)
        channel, got = fabrics[0].mailboxes[0].get(timeout=20)
        assert channel == 9 and got[0] == payload[0]
        assert got[1][0].equals(batch) if payload[0] != 2 else got[1] == payload[1]
    for m in meshes:
        m.shutdown(clean=False)


@pytest.mark.parametrize("encrypt", [True, False])
@pytest.mark.slow
def test_large_messages_kept_by_the_receiver_stay_intact_while_more_arrive(encrypt):
    # A large frame is sealed into a buffer the sender reuses and opened where it was read:
    # what a receiver keeps must not change when the next messages come.
    meshes, fabrics = connected_pair(max_frame=1 << 20, encrypt=encrypt)
    conn = meshes[1].connections[0]
    batches = [pa.record_batch({"x": pa.array(range(i, i + (3 << 17)), pa.int64())}) for i in range(4)]
    kept = []
    for i, batch in enumerate(batches):
        kind, parts = encode((i, [batch]))
        conn.send(9, 1, 0, kind, parts)
        kept.append(fabrics[0].mailboxes[0].get(timeout=20)[1])
    assert [t for t, _ in kept] == [0, 1, 2, 3]
    assert all(got[0].equals(batch) for (_, got), batch in zip(kept, batches))
    for m in meshes:
        m.shutdown(clean=False)


@pytest.mark.parametrize("encrypt", [True, False])
def test_a_large_frame_opened_in_place_is_refused_when_altered(encrypt):
    from timely_spark.communication.aead import Opener, Sealer

    header, payload = b"header", bytes(range(256)) * 1024
    sealed = b"".join(bytes(p) for p in Sealer(b"k" * 32, encrypt=encrypt).seal(header, [payload[:100], payload[100:]]))
    assert (payload in sealed) is not encrypt
    good = Opener(b"k" * 32, encrypt=encrypt).open(header, memoryview(bytearray(sealed)), in_place=True)
    assert bytes(good) == payload
    for at in (10, len(payload) + 3):                   # the payload, the tag
        altered = bytearray(sealed)
        altered[at] ^= 1
        assert Opener(b"k" * 32, encrypt=encrypt).open(header, memoryview(altered), in_place=True) is None
    assert Opener(b"k" * 32, encrypt=encrypt).open(b"other!", memoryview(bytearray(sealed)), in_place=True) is None
