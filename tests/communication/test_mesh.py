"""The mesh's safety and failure behaviour, with real sockets and real processes."""

import hmac
import json
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import timely_spark as ts
from timely_spark.communication.tcp import MAGIC, Mesh, bind_listener, handshake_mac
from timely_spark.communication.thread import ThreadFabric

JOB = Path(__file__).with_name("mesh_job.py")
ROOT = Path(__file__).resolve().parents[2]


def free_ports(n):
    socks = [bind_listener("127.0.0.1", 0) for _ in range(n)]
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def start(process, hostfile, secret, threads=2):
    env = dict(os.environ, TIMELY_SPARK_SECRET=secret, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, str(JOB), "-n", "2", "-p", str(process), "-w", str(threads),
                             "-h", str(hostfile), "--peer-timeout", "10"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def expected_for(index, peers=4):
    return [index, [x for x in range(30) if x % peers == index]]


def test_processes_started_by_hand_with_a_hostfile(tmp_path):
    ports = free_ports(2)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"127.0.0.1:{p}\n" for p in ports))
    procs = [start(p, hostfile, "s3cret") for p in (1, 0)]    # any start order
    outs = [p.communicate(timeout=120) for p in procs]
    for proc, (out, err) in zip(procs, outs):
        assert proc.returncode == 0, err
        assert err == ""                                      # clean shutdown: no error messages
    assert json.loads(outs[1][0]) == [expected_for(0), expected_for(1)]
    assert json.loads(outs[0][0]) == [expected_for(2), expected_for(3)]


class Evil:
    """Unpickling this would create a file."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def attack(port, payload, greeting_first=True):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        if greeting_first:
            s.recv(len(MAGIC) + 32)
        s.sendall(payload)
        time.sleep(0.1)


def test_garbage_unauthenticated_pickles_and_wrong_secrets_are_refused(tmp_path):
    ports = free_ports(2)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"127.0.0.1:{p}\n" for p in ports))
    marker = tmp_path / "pwned"
    bomb = pickle.dumps(Evil(str(marker)))
    p0 = start(0, hostfile, "right")
    deadline = time.monotonic() + 30
    while True:   # wait for process 0's listener
        try:
            socket.create_connection(("127.0.0.1", ports[0]), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    attack(ports[0], b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 4, greeting_first=False)   # garbage
    attack(ports[0], bomb + b"\0" * 100)                                                 # a pickle, no auth
    header = struct.pack("<IIIQBQ", 0, 1, 0, 0, 1, len(bomb))
    attack(ports[0], MAGIC + header + bomb)                                              # a frame, no auth
    # a well-formed handshake with the wrong secret (another run)
    with socket.create_connection(("127.0.0.1", ports[0]), timeout=5) as s:
        hello = s.recv(len(MAGIC) + 32)
        challenge = hello[len(MAGIC):]
        me, mine = struct.pack("<I", 1), os.urandom(32)
        s.sendall(MAGIC + me + mine + handshake_mac(b"wrong", b"connect", challenge, me, mine))
        assert s.recv(32) == b""                                                         # closed on us
    p1 = start(1, hostfile, "right")
    out0, err0 = p0.communicate(timeout=120)
    out1, err1 = p1.communicate(timeout=120)
    assert p0.returncode == 0 and p1.returncode == 0, (err0, err1)
    assert json.loads(out0) == [expected_for(0), expected_for(1)]
    assert not marker.exists()
    assert err0.count("refused a connection") == 5        # the 4 attacks and our readiness probe
    assert "failed authentication" in err0 and "not a timely_spark peer" in err0


def test_duplicate_process_index_is_refused():
    listener = bind_listener()
    port = listener.getsockname()[1]
    fabric = ThreadFabric(1)
    mesh = Mesh(0, [("127.0.0.1", port), ("127.0.0.1", 1)], listener, b"k", fabric, 1, peer_timeout=5,
                connect_timeout=10)
    t = threading.Thread(target=mesh.connect, daemon=True)
    t.start()

    def claim(index):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        challenge = s.recv(len(MAGIC) + 32)[len(MAGIC):]
        me, mine = struct.pack("<I", index), os.urandom(32)
        s.sendall(MAGIC + me + mine + handshake_mac(b"k", b"connect", challenge, me, mine))
        answer = s.recv(32)
        return s, answer, handshake_mac(b"k", b"accept", mine, challenge, struct.pack("<I", 0))

    first, answer, proof = claim(1)
    assert hmac.compare_digest(answer, proof)          # the acceptor proved the secret too
    t.join(timeout=10)
    assert 1 in mesh.connections
    second, answer2, _ = claim(1)
    assert answer2 == b""
    deadline = time.monotonic() + 5
    while not any("already connected" in r for r in mesh.rejected):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    first.close()
    second.close()
    mesh.shutdown(clean=False)


def test_a_killed_process_fails_the_others_within_the_timeout():
    def work(worker):
        inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.probe()))(*s.new_input()))
        if worker.index == 1:
            worker.step()
            os.kill(os.getpid(), signal.SIGKILL)
        worker.step_while(lambda: probe.less_than(1), timeout=10)   # would wait for worker 1 forever

    start_time = time.monotonic()
    with pytest.raises(ts.WorkerFailure) as err:
        ts.execute(work, processes=2, peer_timeout=3)
    assert "process 1" in str(err.value)
    assert time.monotonic() - start_time < 20


@pytest.mark.slow
def test_a_silent_process_fails_the_others_within_the_timeout():
    def work(worker):
        inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.probe()))(*s.new_input()))
        if worker.index == 1:
            worker.step()
            os.kill(os.getpid(), signal.SIGSTOP)
        worker.step_while(lambda: probe.less_than(1), timeout=10)   # would wait for worker 1 forever

    start_time = time.monotonic()
    with pytest.raises(ts.WorkerFailure) as err:
        ts.execute(work, processes=2, peer_timeout=2)
    assert "process 1" in str(err.value) and "silent" in str(err.value)
    assert time.monotonic() - start_time < 20


def test_an_operator_exception_on_worker_1_reaches_the_caller():
    def work(worker):
        worker.dataflow(lambda s: s.to_stream(range(4) if s.index == 0 else [])
                        .exchange(lambda x: x).map(lambda x: 1 // (x - 3), name="Inverse"))

    with pytest.raises(ts.WorkerError) as err:
        ts.execute(work, processes=2, timeout=30)
    assert err.value.worker == 1 and err.value.operator == "Inverse"
    assert "ZeroDivisionError" in str(err.value) and "1 // (x - 3)" in err.value.remote_traceback


def test_clean_shutdown_prints_nothing(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(
        "import timely_spark as ts\n"
        "r = ts.execute(lambda w: (w.dataflow(lambda s: s.to_stream(range(100)).exchange(lambda x: x).count()),"
        " w.index)[1], processes=2, threads=2)\n"
        "print(r)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0 and done.stdout.strip() == "[0, 1, 2, 3]"
    assert done.stderr == ""


def test_secret_is_required_for_processes_started_by_hand(monkeypatch):
    monkeypatch.delenv("TIMELY_SPARK_SECRET", raising=False)
    with pytest.raises(ValueError, match="TIMELY_SPARK_SECRET"):
        ts.execute_from_args(lambda w: None, ["-n", "2", "-p", "0"])


def test_hostfile_errors_name_the_line(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("127.0.0.1:2101\nnot-an-address\n")
    with pytest.raises(ValueError, match="hosts, line 2"):
        ts.execute_from_args(lambda w: None, ["-n", "2", "-p", "0", "-h", str(hostfile)])
