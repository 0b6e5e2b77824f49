"""A held connection (its peer's messages past the bound wait for a busy worker) is still
watched for its end: a peer SIGKILLed meanwhile fails the run at once, naming it, while the
busy worker is still busy -- seen by an idle sibling waiting on the sockets, or by the
connection's watchdog when no worker waits.  Real processes, a real SIGKILL."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from timely_spark.communication.allocator import Counted, Inbox
from timely_spark.communication.tcp import Mesh, TcpAllocator, bind_listener
from timely_spark.communication.thread import ThreadFabric
from timely_spark.errors import WorkerAborted, WorkerFailure

MB = 1 << 20
JOB = os.path.join(os.path.dirname(__file__), "flood_job.py")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POLLRDHUP is Linux's")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("link", ["local", "tcp"])
@pytest.mark.parametrize("sibling", ["idle", "none"])
def test_a_peer_killed_while_its_connection_is_held_fails_the_run_before_the_busy_worker_steps(link, sibling):
    listeners = [bind_listener() for _ in range(2)]
    host, port = listeners[0].getsockname()
    # Process 1 knows process 0 as "localhost" for TCP: another local socket name than the
    # one process 0 listens on, so it connects over TCP (the local socket otherwise).
    known = host if link == "local" else "localhost"
    child = subprocess.Popen([sys.executable, JOB, str(listeners[1].fileno()), known, str(port)],
                             pass_fds=[listeners[1].fileno()], stdout=subprocess.PIPE, text=True,
                             cwd=os.path.dirname(os.path.dirname(os.path.dirname(JOB))))
    peer = listeners[1].getsockname()
    listeners[1].close()
    fabric = ThreadFabric(2, offset=0, wakeable=True)
    mesh = Mesh(0, [(host, port), peer], listeners[0], b"k", fabric, 2,
                # over TCP the killed peer's kernel keeps the connection (its unsent data waits on our
                # full window) until our next frame (a heartbeat: every 2 s here) meets its reset
                peer_timeout=600 if link == "local" else 8,
                connect_timeout=30, inbound_limit=MB)
    go = threading.Event()                       # the busy worker computes until the test sets it
    busy_done = threading.Event()
    stop = threading.Event()
    idle_errors: list = []

    def busy():                                  # worker 0: takes nothing until told (bounded), then steps
        go.wait(60)
        mailbox = fabric.mailboxes[0]
        while not mailbox.empty():
            item = mailbox.get()
            if type(item) is Counted:            # (not a wake-up signal)
                item.release()
        busy_done.set()

    def idle():                                  # worker 1: waits on its mailbox and the sockets
        worker = TcpAllocator(1, fabric, mesh, 3)
        worker.allocate(7, Inbox(lambda: None))
        until = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < until:
            try:
                worker.receive(1.0)
            except WorkerAborted as exc:
                idle_errors.append(exc)
                return

    threads = [threading.Thread(target=busy, daemon=True)]
    try:
        mesh.connect()
        assert child.stdout.readline().strip() == "connected"
        if link == "tcp":
            assert mesh.connections[1].sock.family in (socket.AF_INET, socket.AF_INET6)
        else:
            assert mesh.connections[1].sock.family == socket.AF_UNIX
        threads[0].start()
        if sibling == "idle":
            threads.append(threading.Thread(target=idle, daemon=True))
            threads[1].start()
        until = time.monotonic() + 60
        while mesh.read_ahead(1) < MB and time.monotonic() < until:
            time.sleep(0.01)
        assert mesh.read_ahead(1) >= MB and mesh.connections[1].holding   # held for worker 0
        time.sleep(0.5)                          # (the watchdog and the idle worker see it held)
        assert fabric.failure is None
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        until = time.monotonic() + 30
        while fabric.failure is None and time.monotonic() < until and not busy_done.is_set():
            time.sleep(0.01)
        seen_while_busy = not busy_done.is_set()
        go.set()
        assert fabric.failure is not None, "a peer killed while its connection was held: no failure"
        assert seen_while_busy, "the peer's death was seen only once the busy worker stepped"
        error = fabric.failure[1]
        assert isinstance(error, WorkerFailure) and "process 1" in str(error) \
            and "closed the connection" in str(error), error
        if sibling == "idle":
            threads[1].join(30)
            assert idle_errors and "process 1" in str(idle_errors[0])    # the sibling learnt of it
        assert busy_done.wait(30)
        assert mesh.read_ahead(1) == 0       # what was read past the bound was counted, and released when taken
    finally:
        go.set()
        stop.set()
        if child.poll() is None:
            child.kill()
            child.wait(30)
        child.stdout.close()
        mesh.shutdown(clean=False)
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads)
