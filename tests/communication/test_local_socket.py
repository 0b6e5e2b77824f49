"""Processes on one host meet through a local (Unix) socket beside the TCP listener, with the
same handshake; a name squatted by someone else costs them nothing but the detour over TCP.
A worker reading its sockets takes its own messages straight into its inboxes, after what
another thread read before and left in its mailbox; what it reads for a channel it has not
allocated yet waits for the channel."""

import os
import select
import socket
import sys
import threading
import time

import pytest

from timely_spark.communication.allocator import Inbox
from timely_spark.communication.codec import encode
from timely_spark.communication.local_socket import local_name
from timely_spark.communication.tcp import MAGIC, TcpAllocator, bind_listener
from timely_spark.runtime import POLL_INTERVAL

from .test_encryption import connected_pair

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract Unix sockets are Linux's")


def test_processes_on_one_host_connect_through_the_local_socket_and_frames_flow_both_ways():
    meshes, fabrics = connected_pair()
    try:
        assert [m.connections[1 - p].sock.family for p, m in enumerate(meshes)] == [socket.AF_UNIX] * 2
        for p in range(2):
            conn = meshes[p].connections[1 - p]
            conn.send(7, p, 1 - p, *encode((p, ["over the local socket"])))
        for p in range(2):
            assert fabrics[p].mailboxes[0].get(timeout=20) == (7, (1 - p, ["over the local socket"]))
        assert fabrics[0].failure is None and fabrics[1].failure is None
    finally:
        for m in meshes:
            m.shutdown(clean=False)


def test_a_squatter_on_the_local_name_proves_nothing_and_the_processes_meet_over_tcp():
    listeners = [bind_listener() for _ in range(2)]
    squatter = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    squatter.bind(local_name(b"k", *listeners[0].getsockname()))            # taken before process 0's mesh starts
    squatter.listen(4)
    met = []

    def impostor():                                                        # answers like a mesh, without the secret
        squatter.settimeout(20)
        try:
            conn, _ = squatter.accept()
        except OSError:
            return
        try:
            conn.sendall(MAGIC + bytes(32))                                # a greeting and a challenge
            met.append(conn.recv(200))                                     # the connector's proof
            conn.sendall(bytes(32))                                        # a proof it cannot make
            met.append(conn.recv(200))
        finally:
            conn.close()

    t = threading.Thread(target=impostor, daemon=True)
    t.start()
    try:
        meshes, fabrics = connected_pair(listeners)
        try:
            assert meshes[0].local_listener is None                        # the name was taken: TCP only
            assert meshes[1].connections[0].sock.family in (socket.AF_INET, socket.AF_INET6)
            meshes[1].connections[0].send(7, 1, 0, *encode((0, ["over tcp"])))
            assert fabrics[0].mailboxes[0].get(timeout=20) == (7, (0, ["over tcp"]))
            t.join(20)
            assert b"over tcp" not in b"".join(met)                         # it saw a proof it cannot use, no frame
        finally:
            for m in meshes:
                m.shutdown(clean=False)
    finally:
        squatter.close()


def test_a_worker_reading_its_sockets_takes_its_messages_straight_into_its_inboxes_in_order():
    meshes, fabrics = connected_pair(wakeable=True)
    allocator = TcpAllocator(0, fabrics[0], meshes[0], 2)
    mailbox = fabrics[0].mailboxes[0]
    puts = []
    put = mailbox.put
    mailbox.put = lambda item, *a, **k: (puts.append(item), put(item, *a, **k))   # what goes through the mailbox
    delivered = []
    deliver = allocator.deliver
    allocator.deliver = lambda channel, payload: (delivered.append(payload[1]), deliver(channel, payload))
    woken = []
    try:
        inbox = Inbox(lambda: woken.append(threading.get_ident()))
        allocator.allocate(7, inbox)
        meshes[0].parked.add(-1)                        # the watchdog leaves reading to the workers (it reads
        time.sleep(2 * POLL_INTERVAL)                   # only while none waits; a read begun before has ended)
        sender = meshes[1].connections[0]
        sender.send(7, 1, 0, *encode((0, ["first"])))
        until = time.monotonic() + 20
        while not puts and time.monotonic() < until:    # read by another thread (as the watchdog does): the mailbox
            with meshes[0].connections[1].read_lock:
                meshes[0].connections[1].pump()
        assert puts, "the message never arrived"
        for i in range(3):
            sender.send(7, 1, 0, *encode((0, [f"then {i}"])))
        select.select([meshes[0].connections[1].sock], [], [], 20)
        allocator.receive()                             # a stepping worker: its sockets first, but "first" before
        got = []
        until = time.monotonic() + 20
        while len(got) < 4 and time.monotonic() < until and fabrics[0].failure is None:
            allocator.receive(0.1)
            while inbox.queue:
                got.extend(inbox.queue.popleft()[1])
        assert got == ["first", "then 0", "then 1", "then 2"]
        assert [item[1][1] for item in puts] == [["first"]]   # the worker's own reads never touched its mailbox
        assert delivered == [["first"]]                 # nor Allocator.deliver: inline, straight into the inbox
        assert woken == [threading.get_ident()] * 4     # each put (and woken) by the worker's own thread
        assert fabrics[0].failure is None
    finally:
        meshes[0].parked.discard(-1)
        for m in meshes:
            m.shutdown(clean=False)


def test_what_a_worker_reads_for_a_channel_it_has_not_allocated_waits_for_it_then_wakes_its_inbox_in_order():
    meshes, fabrics = connected_pair(wakeable=True)
    allocator = TcpAllocator(0, fabrics[0], meshes[0], 2)
    try:
        sender = meshes[1].connections[0]
        sender.send(9, 1, 0, *encode((0, ["early"])))
        for _ in range(200):                            # read by the worker itself, channel 9 not allocated here
            if allocator.receive(0.1):
                break
        woken = []
        inbox = Inbox(lambda: woken.append("woken"))
        allocator.allocate(9, inbox)
        assert [m[1] for m in inbox.queue] == [["early"]] and woken == ["woken"]
        woken.clear()
        for i in range(2):
            sender.send(9, 1, 0, *encode((0, [f"late {i}"])))
        for _ in range(200):
            if len(inbox.queue) == 3:
                break
            allocator.receive(0.1)
        assert [m[1] for m in inbox.queue] == [["early"], ["late 0"], ["late 1"]]
        assert woken                                    # a message read straight into its inbox wakes its reader
        assert fabrics[0].failure is None
    finally:
        for m in meshes:
            m.shutdown(clean=False)


def test_the_local_name_is_keyed_by_the_secret_and_says_nothing_of_the_address():
    names = {local_name(secret, "127.0.0.1", port) for secret in (b"k", b"other") for port in (5000, 5001)}
    assert len(names) == 4                                  # unknown without the secret: nobody can take it first
    assert not any(b"5000" in n or b"127.0.0.1" in n for n in names)
    assert len(local_name(b"k", "h" * 200, 5000)) < 108     # fits a Unix socket name, whatever the host


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to run a process as another user")
def test_a_process_of_another_user_at_the_local_socket_is_refused_before_any_greeting():
    meshes, _ = connected_pair()
    try:
        name = local_name(b"k", *meshes[0].addresses[0])
        read, write = os.pipe()
        child = os.fork()
        if child == 0:                                      # a process of user "nobody", on this host
            try:
                os.setuid(65534)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(20)
                s.connect(name)
                os.write(write, str(len(s.recv(100))).encode())
            finally:
                os._exit(0)
        os.close(write)
        got = os.read(read, 100)
        os.close(read)
        os.waitpid(child, 0)
        assert got == b"0"                                  # closed at once: not even the greeting
        assert any("another user" in r for r in meshes[0].rejected)
    finally:
        for m in meshes:
            m.shutdown(clean=False)
