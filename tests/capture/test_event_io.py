"""EventWriter / EventReader over files and real sockets, and the 5 -> 3 seed example."""

import io
import os
import random
import socket
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

import timely_spark as ts
from timely_spark.capture import EventReader, EventStreamError, EventWriter, Messages, replay_into

ROOT = Path(__file__).resolve().parents[2]


def test_file_round_trip_through_capture_and_replay(tmp_path):
    path = tmp_path / "events.bin"
    writer = EventWriter(path)
    ts.example(lambda s: s.to_stream([3, 1, 2]).map(lambda x: x * 10).capture_into(writer))
    writer.close()
    got = []
    ts.example(lambda s: replay_into([EventReader(path, allow_pickle=True)], s).inspect(got.append))
    assert sorted(got) == [10, 20, 30]


def test_an_unsealed_file_is_not_unpickled_unless_trusted(tmp_path, monkeypatch):
    monkeypatch.delenv("TIMELY_SPARK_SECRET", raising=False)
    path = tmp_path / "events.bin"
    writer = EventWriter(path)
    writer.push(Messages(0, ["x"]))
    writer.close()
    with pytest.raises(EventStreamError, match="events.bin.*allow_pickle=True"):
        EventReader(path)
    assert EventReader(path, allow_pickle=True).next() == Messages(0, ["x"])


def test_a_tampered_or_unauthenticated_frame_is_refused_before_unpickling(tmp_path):
    buf = io.BytesIO()
    w = EventWriter(buf, secret=b"right")
    w.push(Messages(0, ["x"]))
    with pytest.raises(EventStreamError, match="failed authentication"):
        EventReader(io.BytesIO(buf.getvalue()), secret=b"wrong").next()
    data = bytearray(buf.getvalue())
    data[-1] ^= 1
    with pytest.raises(EventStreamError, match="failed authentication"):
        EventReader(io.BytesIO(bytes(data)), secret=b"right").next()
    partial = EventReader(io.BytesIO(buf.getvalue()[:-3]), secret=b"right")
    assert partial.next() is None        # a frame still being written: not yet


def test_sockets_need_a_secret(monkeypatch):
    monkeypatch.delenv("TIMELY_SPARK_SECRET", raising=False)
    a, b = socket.socketpair()
    with pytest.raises(ValueError, match="shared secret"):
        EventWriter(a)
    a.close(), b.close()


def test_over_a_real_tcp_socket():
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    events = ts.example(lambda s: s.to_stream(range(5)).capture())

    def send():
        with socket.create_connection(("127.0.0.1", port)) as sock:
            w = EventWriter(sock, secret="s")
            while True:
                try:
                    e = events.next()
                except StopIteration:
                    break
                if e is None:
                    break
                w.push(e)
            w.close()

    threading.Thread(target=send).start()
    sock, _ = listener.accept()
    reader = EventReader(sock, secret="s")
    got = []
    ts.example(lambda s: replay_into([reader], s).inspect(got.append))
    assert sorted(got) == list(range(5))
    sock.close()
    listener.close()


def free_ports(count):
    """A base port with ``count`` ports free from it, below the kernel's ephemeral range (where
    connections take their local ports, so a free port there may be taken a moment later)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for base in random.Random().sample(range(10000, low - count), 100):
        held = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise AssertionError(f"no {count} free ports in a row below {low}")


def test_capture_send_and_recv_five_into_three(tmp_path):
    base = free_ports(5)
    env = dict(os.environ, TIMELY_SPARK_SECRET="capture-test", PYTHONPATH=str(ROOT))
    recv = subprocess.Popen([sys.executable, str(ROOT / "jobs" / "examples" / "capture_recv.py"), "5", "-w", "3",
                             "--port-base", str(base)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    send = subprocess.run([sys.executable, str(ROOT / "jobs" / "examples" / "capture_send.py"), "-w", "5",
                           "--port-base", str(base)], capture_output=True, text=True, env=env, timeout=120)
    out, err = recv.communicate(timeout=120)
    assert send.returncode == 0 and recv.returncode == 0, f"sender:\n{send.stderr}\nreceiver:\n{err}"
    lines = out.splitlines()
    assert len(lines) == 50
    assert Counter(lines) == Counter(f"replayed: {x}" for x in range(10) for _ in range(5))


@pytest.mark.parametrize("job", ["capture_send.py", "capture_recv.py"])
def test_capture_jobs_without_the_secret_fail_at_once_saying_so(job):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("TIMELY_SPARK_SECRET", None)
    args = ["5", "--port-base", "1"] if job == "capture_recv.py" else ["--port-base", "1"]
    done = subprocess.run([sys.executable, str(ROOT / "jobs" / "examples" / job), *args], capture_output=True,
                          text=True, env=env, timeout=30)
    assert done.returncode != 0
    assert "TIMELY_SPARK_SECRET" in done.stderr and "export" in done.stderr
