"""The TCP mesh between worker processes: authenticated, framed, FIFO, fail-stop.

Every process has a listening socket that is already bound (port 0 on the host it
was given, never closed and re-bound), the addresses of all processes, and a
secret shared by the run.  Process ``i`` connects to every process ``j < i`` and
accepts from every ``j > i``: one connection per pair.

Authentication comes before anything is decoded: the accepting side sends a
random challenge; the connecting side answers with its process index, its own
challenge and ``HMAC(secret, ...)`` over both; the acceptor checks it (and that the
index is expected and not already connected) and answers with its own HMAC.  The
secret never crosses the wire.  Connections that fail this are closed; the run
goes on.

Every frame after the handshake is protected: each direction of a connection has
its own key, derived with HMAC-SHA256 from the secret and both handshake nonces
(so keys differ per connection and per run), and each frame carries an
HMAC-SHA256 tag over its header, its payload and its number in that direction.
The receiver checks the tag before it decodes (let alone unpickles) anything, so a
frame injected, altered, reordered, replayed or dropped by someone on the path fails
the connection, naming the peer.  Integrity and authenticity are protected;
confidentiality is not (payloads travel in clear).

Each message is one frame -- a fixed header ``(channel, source worker, target
worker, sequence number, kind, length)``, the payload (see :mod:`.codec`) and the
tag -- written with one gathered ``sendmsg`` under the connection's lock, so frames
of one sender stay in order (FIFO per channel and peer).  A message larger than
:data:`~timely_spark.runtime.MAX_FRAME` goes as several frames; a header announcing
more than that fails the connection before anything is allocated.  A reader thread
per connection checks and decodes frames and puts them into the target worker's
mailbox.

The listener gives each connection one deadline for its whole handshake, handshakes
at most :data:`~timely_spark.runtime.MAX_HANDSHAKES` at once (more are closed at
once), and keeps accepting after transient errors (too many open files, aborted
connections), backing off.

Failure: a peer that closes without saying goodbye, or stays silent (no frame,
not even a heartbeat) for ``peer_timeout`` seconds, fails the run with
:class:`~timely_spark.errors.WorkerFailure` naming it; a peer whose worker raised
sends the error, which fails the run here with the same error.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import pickle
import socket
import struct
import threading
import time
from typing import Any

from ..errors import TimelyError, WorkerAborted, WorkerError, WorkerFailure
from ..runtime import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_PEER_TIMEOUT,
    HANDSHAKE_TIMEOUT,
    HEARTBEATS_PER_PEER_TIMEOUT,
    LISTEN_BACKLOG,
    MAX_FRAME,
    MAX_HANDSHAKES,
    MAX_RETRY_BACKOFF,
    MIN_HEARTBEAT_INTERVAL,
    POLL_INTERVAL,
    RETRY_BACKOFF,
    THREAD_JOIN_WAIT,
)
from .allocator import Allocator, Inbox, LocalPusher, MailboxPusher
from .codec import decode, encode
from .thread import ThreadFabric

__all__ = ["Mesh", "TcpAllocator", "bind_listener", "frame_keys", "frame_tag", "handshake_mac", "recv_exact"]

log = logging.getLogger(__name__)

MAGIC = b"TSMESH01"
NONCE = 32
MAC = 32
HEADER = struct.Struct("<IIIQBQ")     # channel, source, target, seq, kind, length
CONTROL = 0xFFFFFFFF                  # channel of control frames
HEARTBEAT, GOODBYE, ERROR = 10, 11, 12
MORE = 0x80                           # kind flag: the message continues in the next frame
TAG = 32                              # HMAC-SHA256 tag after each frame


def bind_listener(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening socket bound to ``host:port`` (port 0: any free port), kept bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(LISTEN_BACKLOG)
    return sock


def handshake_mac(secret: bytes, *parts: bytes) -> bytes:
    """HMAC-SHA256 of the concatenated parts (the handshake's proofs, and key derivation)."""
    return hmac.new(secret, b"".join(parts), hashlib.sha256).digest()


def recv_exact(sock: socket.socket, n: int, deadline: float = 0.0) -> bytearray:
    """Exactly ``n`` bytes; with a ``deadline`` (monotonic), raise socket.timeout past it."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("deadline passed")
            sock.settimeout(left)
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError("connection closed")
        got += k
    return buf


def frame_keys(secret: bytes, challenge: bytes, nonce: bytes) -> tuple[bytes, bytes]:
    """The two directions' frame keys of a connection: ``(connector -> acceptor,
    acceptor -> connector)``, from the secret and the handshake's two nonces."""
    base = handshake_mac(secret, b"timely_spark frames", challenge, nonce)
    return handshake_mac(base, b"connector to acceptor"), handshake_mac(base, b"acceptor to connector")


def frame_tag(key: bytes, number: int, parts: list) -> bytes:
    """The tag of frame ``number`` of a direction: HMAC-SHA256 over the number and the frame."""
    mac = hmac.new(key, number.to_bytes(8, "little"), hashlib.sha256)
    for p in parts:
        mac.update(p)
    return mac.digest()


def _send_parts(sock: socket.socket, parts: list) -> None:
    views = [memoryview(p).cast("B") for p in parts]
    views = [v for v in views if v.nbytes]
    while views:
        sent = sock.sendmsg(views)
        while sent:
            if sent >= views[0].nbytes:
                sent -= views[0].nbytes
                views.pop(0)
            else:
                views[0] = views[0][sent:]
                sent = 0


class _Connection:
    def __init__(self, mesh: "Mesh", sock: socket.socket, peer: int, send_key: bytes, recv_key: bytes) -> None:
        self.mesh = mesh
        self.sock = sock
        self.peer = peer
        self.lock = threading.Lock()
        self.seq: dict[tuple[int, int, int], int] = {}
        self.goodbye = threading.Event()
        self.closed = False
        self._send_key, self._recv_key = send_key, recv_key
        self._sent = 0          # frames sent in this direction (the tag's number)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def describe(self) -> str:
        host, port = self.mesh.addresses[self.peer]
        return f"process {self.peer} ({host}:{port})"

    def send(self, channel: int, source: int, target: int, kind: int, parts: list) -> None:
        views = [memoryview(p).cast("B") for p in parts]
        with self.lock:
            key = (channel, source, target)
            seq = self.seq.get(key, 0)
            self.seq[key] = seq + 1
            try:
                for chunk, more in _chunks(views, self.mesh.max_frame):
                    length = sum(v.nbytes for v in chunk)
                    header = HEADER.pack(channel, source, target, seq, kind | (MORE if more else 0), length)
                    tag = frame_tag(self._send_key, self._sent, [header, *chunk])
                    self._sent += 1
                    _send_parts(self.sock, [header, *chunk, tag])
            except OSError as exc:
                failure = WorkerFailure(f"cannot send to {self.describe()}: {exc}")
                self.mesh.fail(failure)
                raise failure from exc

    def control(self, kind: int, body: bytes = b"") -> None:
        try:
            self.send(CONTROL, 0, 0, kind, [body])
        except WorkerFailure:
            pass

    def _read_frame(self, number: int) -> tuple[int, int, int, int, int, memoryview]:
        """The next frame, its tag checked before anything of it is used."""
        sock = self.sock
        header = recv_exact(sock, HEADER.size)
        channel, source, target, seq, kind, length = HEADER.unpack(header)
        if length > self.mesh.max_frame:
            raise _BadFrame(f"{self.describe()} announced a frame of {length} bytes, over the limit of "
                            f"{self.mesh.max_frame}")
        body = memoryview(recv_exact(sock, length)) if length else memoryview(b"")
        tag = bytes(recv_exact(sock, TAG))
        if not hmac.compare_digest(tag, frame_tag(self._recv_key, number, [header, body])):
            raise _BadFrame(f"a frame from {self.describe()} failed its integrity check (injected, altered, "
                            "reordered, replayed or dropped on the way)")
        return channel, source, target, seq, kind, body

    def _relayed_error(self, body: memoryview) -> BaseException:
        """The error a peer reported (its frame authenticated): timely_spark's errors as
        they are (a WorkerError names the peer's worker); anything else as a failure of
        the peer."""
        exc = pickle.loads(body)
        if isinstance(exc, TimelyError):
            return exc
        return WorkerFailure(f"{self.describe()} failed: {exc!r}")

    def read_loop(self) -> None:
        mesh = self.mesh
        sock = self.sock
        sock.settimeout(mesh.peer_timeout)
        expected: dict[tuple[int, int, int], int] = {}
        number = 0
        pending: list[memoryview] = []          # the first frames of a message sent in several
        try:
            while True:
                channel, source, target, seq, kind, body = self._read_frame(number)
                number += 1
                if kind & MORE:
                    pending.append(body)
                    continue
                if pending:
                    pending.append(body)
                    body = memoryview(b"".join(pending))
                    pending = []
                if channel == CONTROL:
                    if kind == GOODBYE:
                        self.goodbye.set()
                    elif kind == ERROR:
                        mesh.fail(self._relayed_error(body), remote=True)
                    continue
                key = (channel, source, target)
                if seq != expected.get(key, 0):
                    raise ValueError(f"frame {seq} on channel {channel} from worker {source}, "
                                     f"expected {expected.get(key, 0)}")
                expected[key] = seq + 1
                mesh.deliver(target, channel, decode(kind, body))
        except _BadFrame as exc:
            mesh.fail(WorkerFailure(str(exc)))
        except socket.timeout:
            if not self.goodbye.is_set():
                mesh.fail(WorkerFailure(f"{self.describe()} went silent for {mesh.peer_timeout} s"))
        except (EOFError, OSError) as exc:
            if not self.goodbye.is_set() and not mesh.closing:
                mesh.fail(WorkerFailure(f"{self.describe()} closed the connection ({exc})"))
        except Exception as exc:  # a corrupt frame from an authenticated peer
            mesh.fail(WorkerFailure(f"bad frame from {self.describe()}: {exc}"))
        finally:
            self.goodbye.set()


class _BadFrame(Exception):
    """A frame that failed its check: the connection is failed with this message."""


def _chunks(views: list, limit: int) -> list[tuple[list, bool]]:
    """The views as frames of at most ``limit`` bytes: ``[(views, more_follows)]``."""
    total = sum(v.nbytes for v in views)
    if total <= limit:
        return [(views, False)]
    frames: list[tuple[list, bool]] = []
    current: list = []
    size = 0
    for v in views:
        while v.nbytes:
            take = min(v.nbytes, limit - size)
            current.append(v[:take])
            size += take
            v = v[take:]
            if size == limit:
                frames.append((current, True))
                current, size = [], 0
    if current:
        frames.append((current, True))
    last, _ = frames[-1]
    frames[-1] = (last, False)
    return frames


class Mesh:
    """The connections of process ``process`` to all others, and their threads.

    ``addresses[j]`` is process ``j``'s ``(host, port)``; ``listener`` is this process's
    bound listening socket (its address is ``addresses[process]``).
    """

    def __init__(self, process: int, addresses: list[tuple[str, int]], listener: socket.socket, secret: bytes,
                 fabric: ThreadFabric, threads: int, peer_timeout: float = DEFAULT_PEER_TIMEOUT,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, max_frame: int = MAX_FRAME,
                 handshake_timeout: float = HANDSHAKE_TIMEOUT) -> None:
        if not secret:
            raise ValueError("the mesh needs a non-empty secret")
        self.process = process
        self.addresses = [(str(h), int(p)) for h, p in addresses]
        self.listener = listener
        self.secret = secret
        self.fabric = fabric
        self.threads = threads
        self.peer_timeout = peer_timeout
        self.connect_timeout = connect_timeout
        self.max_frame = max_frame
        self.handshake_timeout = handshake_timeout
        self._handshakes = threading.BoundedSemaphore(MAX_HANDSHAKES)
        self.connections: dict[int, _Connection] = {}
        self.closing = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._threads: list[threading.Thread] = []
        self.rejected: list[str] = []     # why connections were refused (for tests and logs)

    # ---- establishing ---------------------------------------------------------------
    def connect(self) -> None:
        """Connect to every peer (authenticated) or raise WorkerFailure by the deadline."""
        deadline = time.monotonic() + self.connect_timeout
        self.start_accepting()
        for j in range(self.process):
            self._connect_to(j, deadline)
        with self._ready:
            while len(self.connections) < len(self.addresses) - 1:
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = [j for j in range(len(self.addresses)) if j != self.process and j not in self.connections]
                    raise WorkerFailure(f"process {self.process}: no authenticated connection from process(es) "
                                        f"{missing} within {self.connect_timeout} s")
                self._ready.wait(min(left, POLL_INTERVAL))
        for conn in self.connections.values():
            t = threading.Thread(target=conn.read_loop, name=f"timely-read-{self.process}-{conn.peer}", daemon=True)
            t.start()
            self._threads.append(t)
        hb = threading.Thread(target=self._heartbeat_loop, name=f"timely-heartbeat-{self.process}", daemon=True)
        hb.start()
        self._threads.append(hb)

    def _connect_to(self, j: int, deadline: float) -> None:
        host, port = self.addresses[j]
        delay = RETRY_BACKOFF
        while True:
            try:
                wait = max(POLL_INTERVAL, min(self.handshake_timeout, deadline - time.monotonic()))
                sock = socket.create_connection((host, port), timeout=wait)
                break
            except OSError as exc:
                if time.monotonic() + delay > deadline:
                    raise WorkerFailure(f"process {self.process}: cannot connect to process {j} at {host}:{port} "
                                        f"within {self.connect_timeout} s ({exc})") from exc
                time.sleep(delay)
                delay = min(delay * 2, MAX_RETRY_BACKOFF)
        try:
            until = time.monotonic() + self.handshake_timeout
            hello = recv_exact(sock, len(MAGIC) + NONCE, until)
            if bytes(hello[:len(MAGIC)]) != MAGIC:
                raise WorkerFailure(f"{host}:{port} is not a timely_spark mesh listener")
            challenge = bytes(hello[len(MAGIC):])
            mine = os.urandom(NONCE)
            me = struct.pack("<I", self.process)
            sock.sendall(MAGIC + me + mine + handshake_mac(self.secret, b"connect", challenge, me, mine))
            answer = bytes(recv_exact(sock, MAC, until))
            them = struct.pack("<I", j)
            if not hmac.compare_digest(answer, handshake_mac(self.secret, b"accept", mine, challenge, them)):
                raise WorkerFailure(f"the listener at {host}:{port} (process {j}) did not prove the run's secret: "
                                    "refusing to join it")
            sock.settimeout(None)
        except (OSError, EOFError) as exc:
            sock.close()
            raise WorkerFailure(f"handshake with process {j} at {host}:{port} failed: {exc}") from exc
        except WorkerFailure:
            sock.close()
            raise
        send_key, recv_key = frame_keys(self.secret, challenge, mine)
        with self._ready:
            self.connections[j] = _Connection(self, sock, j, send_key, recv_key)
            self._ready.notify_all()

    def start_accepting(self) -> None:
        """Start the thread that accepts and authenticates peers (``connect`` does)."""
        acceptor = threading.Thread(target=self._accept_loop, name=f"timely-accept-{self.process}", daemon=True)
        acceptor.start()
        self._threads.append(acceptor)

    def _accept_loop(self) -> None:
        """Accept connections until stopped; transient errors (EMFILE, ECONNABORTED...)
        back off and go on.  Each connection's handshake runs in its own thread, at most
        MAX_HANDSHAKES at once; more are closed at once."""
        self.listener.settimeout(POLL_INTERVAL)
        backoff = RETRY_BACKOFF
        while not self._stop.is_set():
            try:
                sock, addr = self.listener.accept()
            except socket.timeout:
                continue
            except OSError as exc:
                if self._stop.is_set() or self.listener.fileno() < 0:
                    return
                log.warning("timely_spark mesh, process %d: accept failed (%s); retrying", self.process, exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_RETRY_BACKOFF)
                continue
            backoff = RETRY_BACKOFF
            if not self._handshakes.acquire(blocking=False):
                self._refuse(sock, addr, f"too many connections in their handshake (over {MAX_HANDSHAKES})")
                continue
            try:
                threading.Thread(target=self._bounded_handshake, args=(sock, addr), daemon=True).start()
            except RuntimeError as exc:      # no thread to be had
                self._handshakes.release()
                self._refuse(sock, addr, f"cannot start its handshake ({exc})")

    def _bounded_handshake(self, sock: socket.socket, addr: Any) -> None:
        try:
            self._handshake(sock, addr)
        finally:
            self._handshakes.release()

    def _refuse(self, sock: socket.socket, addr: Any, why: str) -> None:
        self.rejected.append(f"{addr}: {why}")
        log.warning("timely_spark mesh, process %d: refused a connection from %s: %s", self.process, addr, why)
        try:
            sock.close()
        except OSError:
            pass

    def _handshake(self, sock: socket.socket, addr: Any) -> None:
        try:
            until = time.monotonic() + self.handshake_timeout
            sock.settimeout(self.handshake_timeout)
            challenge = os.urandom(NONCE)
            sock.sendall(MAGIC + challenge)
            reply = bytes(recv_exact(sock, len(MAGIC) + 4 + NONCE + MAC, until))
        except socket.timeout:
            return self._refuse(sock, addr, f"handshake not done within {self.handshake_timeout} s")
        except (OSError, EOFError) as exc:
            return self._refuse(sock, addr, f"no valid greeting ({exc})")
        if reply[:len(MAGIC)] != MAGIC:
            return self._refuse(sock, addr, "not a timely_spark peer (bad greeting)")
        me_bytes = reply[len(MAGIC):len(MAGIC) + 4]
        theirs = reply[len(MAGIC) + 4:len(MAGIC) + 4 + NONCE]
        mac = reply[len(MAGIC) + 4 + NONCE:]
        if not hmac.compare_digest(mac, handshake_mac(self.secret, b"connect", challenge, me_bytes, theirs)):
            return self._refuse(sock, addr, "failed authentication (wrong secret, or another run)")
        (peer,) = struct.unpack("<I", me_bytes)
        with self._ready:
            if not self.process < peer < len(self.addresses):
                return self._refuse(sock, addr, f"authenticated, but process index {peer} is not expected here")
            if peer in self.connections:
                return self._refuse(sock, addr, f"authenticated, but process {peer} is already connected")
            try:
                sock.sendall(handshake_mac(self.secret, b"accept", theirs, challenge, struct.pack("<I", self.process)))
                sock.settimeout(None)
            except OSError as exc:
                return self._refuse(sock, addr, f"handshake failed ({exc})")
            connector_to_us, us_to_connector = frame_keys(self.secret, challenge, theirs)
            self.connections[peer] = _Connection(self, sock, peer, send_key=us_to_connector, recv_key=connector_to_us)
            self._ready.notify_all()

    # ---- running ----------------------------------------------------------------------
    def _heartbeat_loop(self) -> None:
        interval = max(self.peer_timeout / HEARTBEATS_PER_PEER_TIMEOUT, MIN_HEARTBEAT_INTERVAL)
        while not self._stop.wait(interval):
            for conn in list(self.connections.values()):
                conn.control(HEARTBEAT)

    def connection_for(self, worker: int) -> _Connection:
        """The connection to the process that hosts global worker ``worker``."""
        return self.connections[worker // self.threads]

    def deliver(self, target: int, channel: int, payload: Any) -> None:
        """Hand a message that arrived for local worker ``target`` to its mailbox."""
        self.fabric.mailboxes[target - self.fabric.offset].put((channel, payload))

    def fail(self, exc: BaseException, remote: bool = False) -> None:
        """Fail the run with ``exc``; ``remote``: a peer reported it (it names its worker)."""
        self.fabric.fail(exc.worker if isinstance(exc, WorkerError) else -1, exc, relayed=remote)

    def report_error(self, exc: BaseException) -> None:
        """Tell every peer that this process failed with ``exc``."""
        try:
            body = pickle.dumps(exc, protocol=5)
        except Exception:
            body = pickle.dumps(WorkerFailure(f"process {self.process} failed: {exc!r}"), protocol=5)
        for conn in list(self.connections.values()):
            conn.control(ERROR, body)

    def shutdown(self, clean: bool) -> None:
        """Say goodbye and wait (bounded) for everyone's goodbye, then close everything."""
        if clean:
            for conn in list(self.connections.values()):
                conn.control(GOODBYE)
            deadline = time.monotonic() + self.peer_timeout
            for conn in list(self.connections.values()):
                conn.goodbye.wait(max(0.0, deadline - time.monotonic()))
        self.closing = True
        self._stop.set()
        for conn in list(self.connections.values()):
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.sock.close()
        try:
            self.listener.shutdown(socket.SHUT_RDWR)   # wakes the accept loop at once (Linux)
        except OSError:
            pass
        self.listener.close()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=THREAD_JOIN_WAIT)


class _TcpPusher:
    __slots__ = ("_conn", "_channel", "_source", "_target")

    def __init__(self, conn: _Connection, channel: int, source: int, target: int) -> None:
        self._conn = conn
        self._channel = channel
        self._source = source
        self._target = target

    def push(self, payload: Any) -> None:
        kind, parts = encode(payload)
        self._conn.send(self._channel, self._source, self._target, kind, parts)


class TcpAllocator(Allocator):
    """Allocator for global worker ``index``: in-process peers through mailboxes,
    other processes through the mesh."""

    def __init__(self, index: int, fabric: ThreadFabric, mesh: Mesh, peers: int) -> None:
        super().__init__(index, peers, fabric.mailboxes[index - fabric.offset])
        self.fabric = fabric
        self.mesh = mesh

    def pushers(self, channel: int, inbox: Inbox) -> list[Any]:
        """One pusher per worker: this worker's inbox, local mailboxes, or the mesh."""
        fabric = self.fabric
        local = range(fabric.offset, fabric.offset + fabric.peers)
        out: list[Any] = []
        for j in range(self.peers):
            if j == self.index:
                out.append(LocalPusher(inbox))
            elif j in local:
                out.append(MailboxPusher(fabric.mailboxes[j - fabric.offset], channel))
            else:
                out.append(_TcpPusher(self.mesh.connection_for(j), channel, self.index, j))
        return out

    def check(self) -> None:
        """Raise WorkerAborted if the run failed elsewhere (checked at every receive)."""
        failure = self.fabric.failure
        if failure is not None and failure[0] != self.index:
            raise WorkerAborted(f"the run failed: {failure[1]}")
