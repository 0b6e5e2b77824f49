"""The TCP mesh between worker processes: encrypted, authenticated, framed, FIFO, fail-stop.

Every process has a listening socket that is already bound (port 0 on the host it
was given, never closed and re-bound), the addresses of all processes, and a
secret shared by the run.  Process ``i`` connects to every process ``j < i`` and
accepts from every ``j > i``: one connection per pair.  A peer on the same host is
connected through the Unix socket beside its listener (see :mod:`.local_socket`: the
kernel's work per small frame is about half of loopback TCP's), with everything below
the same.

Authentication comes before anything is decoded: the accepting side sends a
random challenge; the connecting side answers with its process index, its own
challenge and ``HMAC(secret, ...)`` over both; the acceptor checks it (and that the
index is expected and not already connected) and answers with its own HMAC.  The
secret never crosses the wire.  The greeting's last byte names the cipher (or that
encryption is off), which both sides then use.  Connections that fail this are closed; the run
goes on -- except a peer that proves the run's secret in the other encryption mode: the
connecting side still sends its proof, and both sides fail at once naming the mismatch.

Every frame after the handshake is sealed with an AEAD (see :mod:`.aead`):
AES-256-GCM (ChaCha20-Poly1305 on a CPU without AES instructions) under a key per
direction of the connection, derived with HKDF from the secret and both handshake
nonces (so keys differ per connection and per run), with the frame's number in that
direction as the nonce and the frame's clear header -- its length, nothing else -- as
associated data.  Channel, workers, sequence number, kind and payload all travel
encrypted: someone recording the traffic learns sizes and timing, nothing more.  The
receiver checks the tag before it decodes (let alone unpickles) anything, so a frame
injected, altered, reordered, replayed or dropped by someone on the path fails the
connection, naming the peer.  A direction that would seal more than
:data:`~timely_spark.communication.aead.MAX_FRAMES_PER_KEY` frames closes instead (the run fails
with :class:`~timely_spark.errors.FrameLimitReached`).  With
``TIMELY_SPARK_ENCRYPTION=off`` the payload travels in clear, still authenticated the
same way; the mode is in the greeting, and a peer in the other mode is refused.

A message travels in a frame -- the clear length, the sealed inner header ``(channel, source
worker, target worker, sequence number, kind)`` and payload (see :mod:`.codec`), and the tag
-- alone or, if small, in a bundle (below).  Frames are numbered and written under the
connection's lock, so frames of one sender stay in order (FIFO per channel and peer).  The
small messages a worker sends in one step (its data and its progress) are gathered and
sealed as one frame -- a bundle, each message after its length -- written with one
``sendmsg`` when it finishes the step or waits (up to
:data:`~timely_spark.communication.tcp.SEND_BATCH_BYTES`), so the peer wakes once per step
and opens one frame, not one per message.  A large message (bulk data: an Arrow batch of
megabytes) is sealed by the worker into a buffer of the connection's pool and handed to the
connection's writer thread (see :mod:`.write_behind`), behind what was gathered before it:
the queue is bounded (a worker that would pass the bound waits, reading the peer meanwhile),
every later frame queues behind it until it is written, so the order stays the sealing
order, and the worker goes on with its own work and its reading while the bytes leave.  A
message larger than :data:`~timely_spark.communication.tcp.MAX_FRAME` goes as several
frames; a header announcing more than that fails the connection before anything is
allocated.

Reading: the workers read the sockets themselves, so no thread stands between a
message and its worker.  A worker with nothing to do waits on its mailbox *and* the
sockets at once and wakes as the bytes arrive; a stepping worker reads what has
arrived (one ``poll``) at each step, taking its own messages straight into its inboxes
(the others go to their workers' mailboxes); a worker whose write cannot go on (the peer's
buffer, or its connection's write-behind queue, is full) reads every connection meanwhile,
so two processes sending each other large messages never wait on each other.

Reading ahead is bounded: the messages of one peer that a thread other than their worker
read (the watchdog below, another worker of this process, a worker waiting to send) wait
in their worker's mailbox, counted (:class:`~.allocator.Counted`) until the worker takes
them; once a connection has :data:`~timely_spark.communication.tcp.INBOUND_BYTES` of them
waiting, it is not read (its peer's writes wait for room, TCP's back-pressure) until they
are taken.  The invariant that keeps this from deadlocking: *a worker that waits for room
to send reads every connection, past that bound*.  A wait for room thus never waits on a
worker that waits itself (A waiting toward B while B waits toward A, or around any cycle of
processes): each drains the others.  A worker that neither steps nor waits (busy in an
operator) holds its peers up to the bound; they wait while its process still sends
(heartbeats: busy is not stuck, and the run's own timeout bounds a worker that computes
forever), and fail after ``peer_timeout`` seconds in which it took nothing and sent
nothing, naming it -- never a hang.  While a connection is held so, its silence does not
count against its peer, and what it sends waits in the socket -- its data, and behind it
its goodbye or error (frames too); but the socket is still polled for its end
(:data:`HANG_UP`, no data read), by an idle worker waiting on the sockets and by the
watchdog: a peer that hung up or reset is read to its end at once, past the bound (it
sends nothing more: what is left is what the kernel holds), so its death fails the run
naming it while the busy worker computes, and its goodbye or error is seen as such.

A large frame is read into a buffer of the connection's pool (:mod:`.buffer_pool`) and
opened where it lies; its Arrow batches use that memory as it is, and the buffer is read
into again only once nothing refers to it.  A watchdog thread per connection reads what
waits while no worker does (a quarter of ``peer_timeout`` at most apart: a peer's error,
goodbye or closing is seen while the workers compute) and watches for silence.

The listener gives each connection one deadline for its whole handshake, handshakes
at most :data:`~timely_spark.communication.tcp.MAX_HANDSHAKES` at once (one more drops the
oldest pending handshake of the source holding the most, as the driver's rendezvous
does, so idle connections cannot lock the peers out), and keeps accepting after
transient errors (too many open files, aborted connections), backing off.  A connecting
process whose handshake is closed or times out connects again until its deadline.

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
import select
import socket
import struct
import threading
import time
from collections import defaultdict, deque
from typing import Any, Optional

from ..errors import FrameLimitReached, TimelyError, WorkerAborted, WorkerError, WorkerFailure
from ..runtime import DEFAULT_CONNECT_TIMEOUT, DEFAULT_PEER_TIMEOUT, POLL_INTERVAL
from .aead import (
    AES_GCM,
    MAX_FRAMES_PER_KEY,
    TAG,
    Opener,
    Sealer,
    derive_keys,
    encryption_enabled,
    greeting,
    mode,
)
from .allocator import Allocator, Counted, Inbox, LocalPusher, Mailbox, MailboxPusher
from .buffer_pool import BufferPool
from .codec import ARROW, IN_BAND, PICKLE, decode, encode, pickle_parts
from .local_socket import bind_local, connect_local, local_name, same_user
from .pending import PendingHandshakes
from .thread import ThreadFabric
from .write_behind import IOV_MAX, WriteBehind, advance, write_all

__all__ = ["Mesh", "TcpAllocator", "bind_listener", "frame_keys", "handshake_mac", "recv_exact", "mesh_magic"]

#: Seconds one connection may take for the whole authentication handshake.
HANDSHAKE_TIMEOUT = 10.0

#: Connections that may be in their handshake at once; more are refused at once.
MAX_HANDSHAKES = 16

#: The largest frame (bytes) the mesh sends or accepts; larger messages go as several
#: frames.  A peer announcing more is failed before anything is allocated.
MAX_FRAME = 256 * 1024 * 1024

#: Heartbeats a process sends each peer per ``peer_timeout`` (so one lost or late
#: heartbeat never fails a run) ...
HEARTBEATS_PER_PEER_TIMEOUT = 4

#: ... but never more often than every this many seconds.
MIN_HEARTBEAT_INTERVAL = 0.05

#: Seconds of the first wait before retrying a refused connection or a failed
#: ``accept()`` (too many open files, aborted connection); it doubles on each retry ...
RETRY_BACKOFF = 0.01

#: ... up to this many seconds.
MAX_RETRY_BACKOFF = 1.0

#: Connections the kernel queues for a mesh listener before ``accept()``.
LISTEN_BACKLOG = 64

#: Seconds a process waits for the local socket of a peer on its host to appear (the peer
#: binds it as its mesh starts) before connecting over TCP instead.
LOCAL_WAIT = 0.5

#: Seconds granted to each of the mesh's own threads (readers, acceptor, heartbeat)
#: to end when the mesh shuts down; they are daemon threads, so none can keep a
#: process alive.
THREAD_JOIN_WAIT = 5.0

PEER_ERROR_GRACE = 1.0
"""Seconds a worker that cannot send to a peer waits for that peer's own error (sent
before it closed) to arrive, so that the run reports the cause, not the broken pipe."""

#: Messages smaller than this many bytes that a worker sends in one step are sealed together
#: as one frame (a bundle, at most 4 times this), so the data and the progress of a step cost
#: one seal and one open; larger ones are sealed alone (joining them would only copy them).
BUNDLE_BELOW = 16 * 1024

#: Frames a worker writes in one step are gathered (one system call, one wake-up of the
#: peer) until they hold this many bytes; larger messages go out at once.
SEND_BATCH_BYTES = 256 * 1024

log = logging.getLogger(__name__)

PREFIX = b"TSMESH4"                   # the greeting: PREFIX and one byte naming the mode (see aead.greeting)
NONCE = 32
MAC = 32
HEADER = struct.Struct("<Q")          # in clear (the associated data): the sealed length, tag excluded
INNER = struct.Struct("<IIIQB3x")     # sealed: channel, source, target, seq, kind (24 bytes: payload 8-aligned)
CONTROL = 0xFFFFFFFF                  # channel of control frames
HEARTBEAT, GOODBYE, ERROR = 10, 11, 12
BUNDLE = 13                           # a control frame holding several small messages, each after its length
BUNDLED = struct.Struct("<I")         # the length of one message (inner header and payload) in a bundle
MORE = 0x80                           # kind flag: the message continues in the next frame
_BUNDLE_INNER = INNER.pack(CONTROL, 0, 0, 0, BUNDLE)
REJECTIONS_KEPT = 256                 # refused connections a mesh remembers (Mesh.rejected): the latest
STAGE = 256 * 1024                    # bytes read at once; a larger frame is read into a buffer of its own
SEALING_KEPT = 64 * 1024 * 1024       # bytes of buffers large messages are sealed into that a connection keeps
RECEIVING_KEPT = 64 * 1024 * 1024     # bytes of buffers large frames are read into that a connection keeps
PUMP_BULK = 16 * 1024 * 1024          # bytes of large frames one read delivers before its worker may use them

#: Bytes of one peer's messages that this process reads ahead of its workers (read from the
#: connection and waiting in their mailboxes, not yet taken).  Past it the connection is not
#: read -- the peer's writes then wait, TCP's own back-pressure -- until the workers take
#: them; only a worker that itself waits to send reads past it (see "Reading" above).
INBOUND_BYTES = 64 * 1024 * 1024

#: What a held connection's socket is polled for (its data left unread): the peer hung up
#: (``POLLRDHUP``: Linux only; elsewhere a peer's closing is seen as the data is read again)
#: or the connection failed.
HANG_UP = getattr(select, "POLLRDHUP", 0) | select.POLLERR | select.POLLHUP


def mesh_magic(encrypt: Optional[bool] = None) -> bytes:
    """This process's greeting (``encrypt`` None: as ``$TIMELY_SPARK_ENCRYPTION`` says)."""
    return greeting(PREFIX, encryption_enabled() if encrypt is None else encrypt)


MAGIC = mesh_magic()                  # the greeting of a mesh of this process (at import)


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


def frame_keys(secret: bytes, challenge: bytes, nonce: bytes, magic: bytes = MAGIC) -> tuple[bytes, bytes]:
    """The two directions' frame keys of a connection: ``(connector -> acceptor,
    acceptor -> connector)``, by HKDF from the secret, the handshake's two nonces and
    the greeting (so the mode is bound to the keys)."""
    a, b = derive_keys(secret, challenge + nonce, b"mesh frames " + magic, 2)
    return a, b


class _Connection:
    """One authenticated connection: sealing and writing frames (any thread, under
    ``lock``), and reading, opening and delivering them (whoever holds ``read_lock``:
    the reader thread, or a worker waiting for messages)."""

    def __init__(self, mesh: "Mesh", sock: socket.socket, peer: int, send_key: bytes, recv_key: bytes,
                 magic: bytes = MAGIC) -> None:
        self.mesh = mesh
        self.sock = sock
        self.peer = peer
        self.lock = threading.Lock()
        self.read_lock = threading.Lock()
        self.seq: dict[tuple[int, int, int], int] = defaultdict(int)   # (a subscript, no get call, per message)
        self.goodbye = threading.Event()
        self.reader_done = threading.Event()     # reading has ended (after any ERROR frame)
        self.done_reading = False                # the same, set just before it: read without a call
        self.closed = False
        cipher, encrypt = mode(magic) or (AES_GCM, True)
        self._sealer = Sealer(send_key, cipher, encrypt, mesh.frame_limit, self.describe())
        self._opener = Opener(recv_key, cipher, encrypt, mesh.frame_limit)
        self._out: list = []                     # sealed frames not yet written
        self._unwritten = mesh.unwritten         # where this connection names itself when it gathered frames
        self._seal_small = self._sealer.seal_bytes
        self._out_bytes = 0
        self._gathered: list[bytes] = [_BUNDLE_INNER]   # the bundle of small messages not yet sealed, in pieces
        self._gathered_bytes = 0                 # (0: nothing gathered)
        self._sealing = BufferPool(SEALING_KEPT)      # where large messages are sealed (reused once written)
        self._behind = WriteBehind(sock, f"timely-write-{mesh.process}-{peer}", mesh.peer_timeout,
                                   self._write_failed, heard=self.heard)
        # reading state (under read_lock)
        self._buf = bytearray(STAGE)
        self._view = memoryview(self._buf)
        self._start = self._end = 0
        self._big: Optional[tuple[bytes, Any, int]] = None   # (header, buffer, bytes in it)
        self._pending: list[memoryview] = []     # the first frames of a message sent in several
        self._expected: dict[tuple[int, int, int], int] = defaultdict(int)
        self._receiving = BufferPool(RECEIVING_KEPT)  # where large frames are read (reused once their payload is gone)
        self._reader: Optional[Allocator] = None      # the worker reading now in its own thread (see pump)
        self._force = False                      # reading past the bound of what is read ahead (see pump)
        self._no_wait = False                    # a heartbeat is sent: nothing waits (under lock)
        self._ahead_limit = mesh.inbound_limit
        self._ahead_in = 0                       # bytes of messages put into mailboxes (under read_lock) ...
        self._ahead_out = 0                      # ... and of those the workers took (under _taken_lock)
        self._taken_lock = threading.Lock()
        self._fabric_offset = mesh.fabric.offset
        self.last_heard = time.monotonic()       # a frame arrived, or the connection was held (below)
        self.last_frame = self.last_heard        # a frame arrived (what a wait to send goes by)
        self._drained = False
        self._hang_up: Optional[Any] = None      # a poll for HANG_UP only (see hung_up)
        sock.settimeout(None)
        if sock.family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @property
    def frames_sealed(self) -> int:
        """Frames sealed so far in this connection's sending direction."""
        return self._sealer.frames

    @property
    def read_ahead(self) -> int:
        """Bytes of this peer's messages read and waiting in workers' mailboxes, not yet taken
        (the connection is not read while they are :data:`INBOUND_BYTES` or more, except by a
        worker waiting to send)."""
        return self._ahead_in - self._ahead_out

    def taken(self, nbytes: int) -> None:
        """A worker took ``nbytes`` of this peer's messages from its mailbox (see :class:`~.allocator.Counted`)."""
        with self._taken_lock:
            self._ahead_out += nbytes

    @property
    def holding(self) -> bool:
        """Whether :data:`INBOUND_BYTES` of this peer's messages wait in mailboxes (a read
        that may not pass the bound stops here)."""
        return self._ahead_in - self._ahead_out >= self._ahead_limit

    def heard(self) -> float:
        """When the peer was last heard (``time.monotonic``): now while the connection is
        held and no worker of this process reads past the bound (its silence is ours then,
        decided when asked, not when a read last came by); else when a frame last arrived
        or the hold last began."""
        if self._ahead_in - self._ahead_out >= self._ahead_limit and not self.mesh.forcing:
            return time.monotonic()
        return self.last_heard

    def _held(self) -> bool:
        """Whether reading stops here: the bound of what is read ahead is reached (and this
        read may not pass it).  A held connection's silence does not count against its peer
        -- unless a worker of this process reads every connection past the bound now (it
        waits to send): then what the peer sends is read, and its silence is its own."""
        if self._force or self._ahead_in - self._ahead_out < self._ahead_limit:
            return False
        if not self.mesh.forcing:
            self.last_heard = time.monotonic()
        return True

    def hung_up(self) -> bool:
        """Whether the peer hung up or the connection failed, seen without reading (a held
        connection's data waits; its end is known at once): ``poll`` for :data:`HANG_UP`."""
        if self.done_reading:
            return False
        watch = self._hang_up
        if watch is None:
            watch = self._hang_up = select.poll()
            watch.register(self.sock, HANG_UP)
        return bool(watch.poll(0))

    def read_to_end(self, reader: Optional[Allocator] = None) -> None:
        """Read a hung-up connection to its end, past the bound of what is read ahead: the
        peer sends nothing more, so what is left is what the kernel holds (its goodbye or
        error, after the data before it, is seen as on a connection not held; else the
        peer's death fails the run naming it).  Call under ``read_lock``."""
        while not self.done_reading and self.pump(reader, True):
            pass

    def describe(self) -> str:
        host, port = self.mesh.addresses[self.peer]
        return f"process {self.peer} ({host}:{port})"

    # ---- sending --------------------------------------------------------------------
    def send(self, channel: int, source: int, target: int, kind: int, parts: list, gather: bool = False) -> None:
        """Seal and write one message; ``gather``: it may wait in this connection's
        buffer (until :meth:`flush`, or until the buffer holds SEND_BATCH_BYTES)."""
        size = 0
        for p in parts:
            size += len(p) if type(p) is bytes else memoryview(p).nbytes
        with self.lock:
            key = (channel, source, target)
            seqs = self.seq
            seq = seqs[key]
            seqs[key] = seq + 1
            quiet = channel == CONTROL and kind in (HEARTBEAT, GOODBYE)
            self._guarded(lambda: self._seal_and_write(channel, source, target, seq, kind, parts, size, gather), quiet)

    def _seal_and_write(self, channel: int, source: int, target: int, seq: int, kind: int, parts: list, size: int,
                        gather: bool) -> None:
        """:meth:`send`'s work once the message is numbered (under ``lock``)."""
        out = self._out
        if size < STAGE:                # the common case: one frame, sealed in one call
            message = b"".join((INNER.pack(channel, source, target, seq, kind), *parts))
            if size < BUNDLE_BELOW:     # tiny: sealed with the others gathered
                if self._gathered_bytes + BUNDLED.size + len(message) > BUNDLE_BELOW * 4:
                    self._seal_gathered()
                self._gathered.append(BUNDLED.pack(len(message)))
                self._gathered.append(message)
                self._gathered_bytes += BUNDLED.size + len(message)
            else:
                self._seal_gathered()   # (what was gathered goes first)
                header = HEADER.pack(len(message))
                out.append(header)
                out.append(self._sealer.seal_bytes(header, message))
                self._out_bytes += HEADER.size + len(message) + TAG
            if not gather or self._out_bytes + self._gathered_bytes >= SEND_BATCH_BYTES:
                self._write()
            else:
                self._unwritten.add(self)
            return
        self._seal_gathered()           # (what was gathered goes first)
        views = [memoryview(p).cast("B") for p in parts]
        if not self._sealer.encrypt and kind != ARROW:   # sent in clear from the payload's own memory,
            views = [memoryview(b"".join(views))]         # which may change once this returns: a copy
        chunks = _chunks(views, self.mesh.max_frame)
        into = self._sealing.take(size + len(chunks) * (INNER.size + TAG))
        at = 0
        for chunk, more in chunks:
            inner = INNER.pack(channel, source, target, seq, kind | (MORE if more else 0))
            length = INNER.size + sum(v.nbytes for v in chunk)
            header = HEADER.pack(length)
            out.append(header)
            out.extend(self._sealer.seal(header, [inner, *chunk], into[at:at + length + TAG]))
            at += length + TAG
            self._out_bytes += HEADER.size + length + TAG
        self._out, total, self._out_bytes = [], self._out_bytes, 0
        self._queue(out, total)         # written by the connection's writer thread

    def gather(self, key: tuple[int, int, int], pickled: bytes) -> None:
        """Gather a small message for this step's bundle: ``pickled`` is a payload pickled in band
        (:data:`~.codec.PICKLE` after :data:`~.codec.IN_BAND`, shorter than BUNDLE_BELOW), on the
        channel, from the worker and to the worker of ``key`` -- what :meth:`send` does for it,
        in fewer steps (the path of every progress batch and small data message)."""
        size = _SMALL_ITEM.size + len(pickled)
        channel, source, target = key
        with self.lock:
            seqs = self.seq
            seq = seqs[key]
            seqs[key] = seq + 1
            if self._gathered_bytes + size > BUNDLE_BELOW * 4:
                self._guarded(self._seal_gathered)
            self._gathered += (_SMALL_ITEM.pack(size - BUNDLED.size, channel, source, target, seq, PICKLE, 0),
                               pickled)                     # (one += of a pair: no append calls)
            self._gathered_bytes += size
            if self._out_bytes + self._gathered_bytes >= SEND_BATCH_BYTES:
                self._guarded(self._write)
        unwritten = self._unwritten
        if self not in unwritten:       # (after the lock: a flush that takes it writes this message;
            unwritten.add(self)         # one that took it since writes it too, as it takes the lock after)

    def _queue(self, frames: list, nbytes: int) -> None:
        """Hand sealed frames to the writer thread (under ``lock``), waiting for room in
        its bounded queue while reading what the peer sends."""
        forcing = self.mesh.forcing
        me = threading.get_ident()
        assert me not in forcing, "a wait to send inside another"     # (its discard would end the outer one)
        forcing.add(me)
        try:
            self._behind.wait_room(nbytes, self._read_meanwhile, self._check_sending, self.mesh.read_fds)
        finally:
            forcing.discard(me)
        self._behind.put(frames, nbytes)

    def _read_meanwhile(self) -> None:
        """While this worker waits to send: read every connection, past the bound of what is
        read ahead (the invariant that keeps waits for room from waiting on each other; the
        caller is in ``mesh.forcing`` meanwhile)."""
        self.mesh.read_all(force=True)

    def _check_sending(self) -> None:
        if self.mesh.fabric.failure is not None or self.reader_done.is_set():
            raise OSError("the connection failed while sending")

    def _write_failed(self, exc: BaseException) -> None:
        """The writer thread could not write (called from it): fail the run naming the
        peer -- unless the peer's own error or goodbye explains it."""
        if self.mesh.closing:
            return
        self.reader_done.wait(PEER_ERROR_GRACE)
        if self.goodbye.is_set() or self.mesh.closing:
            return
        self.mesh.fail(WorkerFailure(f"cannot send to {self.describe()}: {exc}"))

    def end_writing(self, drain: float) -> None:
        """Let the writer thread write what is queued (up to ``drain`` seconds), then end it."""
        self._behind.close(drain)

    def _seal_gathered(self) -> None:
        """Seal the gathered small messages (under ``lock``) as one BUNDLE frame holding
        each after its length.  Data and the progress of a step then cost the peer one
        frame to open, and this side one to seal."""
        if not self._gathered_bytes:
            return
        body = b"".join(self._gathered)
        self._gathered, self._gathered_bytes = [_BUNDLE_INNER], 0
        header = HEADER.pack(len(body))
        self._out.append(header)
        self._out.append(self._sealer.seal_bytes(header, body))
        self._out_bytes += HEADER.size + len(body) + TAG

    def _drop_unwritten(self) -> None:
        self._out, self._out_bytes = [], 0
        self._gathered, self._gathered_bytes = [_BUNDLE_INNER], 0

    def _write(self) -> None:
        """Seal what was gathered and write the frames (under ``lock``): behind what the
        writer thread has queued, or, when it is idle, directly.  While the socket cannot
        take more, read what the peer sends meanwhile (so two processes sending each other
        large messages never wait on each other); a peer that takes nothing for
        ``peer_timeout`` seconds fails the send."""
        if self._gathered_bytes and not self._out:   # the common case: one bundle, sealed here and written
            body = b"".join(self._gathered)          # (what _seal_gathered does, inline)
            self._gathered, self._gathered_bytes = [_BUNDLE_INNER], 0
            size = len(body)
            header = HEADER.pack(size)
            out = [header, self._seal_small(header, body)]
            total = HEADER.size + size + TAG
            few = True
        else:
            self._seal_gathered()
            out = self._out
            if not out:
                return
            total = self._out_bytes
            self._out, self._out_bytes = [], 0
            few = len(out) <= IOV_MAX
        if self._behind.queued:               # (something queued or being written: keep the order)
            self._queue(out, total)
            return
        sock = self.sock
        sent = 0
        if few:
            try:                                # the common case: all of it at once
                sent = sock.sendmsg(out, (), socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                pass
            if sent == total:
                return
        views = [v for v in (memoryview(p).cast("B") for p in out) if v.nbytes]
        if self._no_wait:                       # (a heartbeat: the writer thread writes the rest)
            rest = views[advance(views, 0, sent):]
            self._behind.put(rest, sum(v.nbytes for v in rest))
            return
        waiter = select.poll()
        own = sock.fileno()
        waiter.register(own, select.POLLOUT | select.POLLIN)
        others: set[int] = set()

        def blocked() -> None:                  # the socket is full: read the peers until it takes more
            stuck = time.monotonic()
            while True:
                live = set(self.mesh.read_fds())   # every connection still read is read meanwhile
                live.discard(own)
                for fd in others - live:        # (ended -- at its end of file too: no spin on it)
                    waiter.unregister(fd)
                for fd in live - others:
                    waiter.register(fd, select.POLLIN)
                others.clear()
                others.update(live)
                ready = 0
                readable = False
                for fd, ev in waiter.poll(POLL_INTERVAL * 1000.0):
                    if fd == own:
                        ready = ev
                        readable = readable or bool(ev & (select.POLLIN | select.POLLHUP | select.POLLERR))
                    else:
                        readable = True
                if readable:
                    self._read_meanwhile()
                if ready & (select.POLLOUT | select.POLLERR | select.POLLHUP):
                    return
                if self.mesh.fabric.failure is not None or self.reader_done.is_set():
                    raise OSError("the connection failed while sending")
                if time.monotonic() - max(stuck, self.last_frame) > self.mesh.peer_timeout:
                    raise OSError(f"the peer took nothing and sent nothing for {self.mesh.peer_timeout} s")

        forcing = self.mesh.forcing
        me = threading.get_ident()
        assert me not in forcing, "a wait to send inside another"     # (its discard would end the outer one)
        forcing.add(me)
        try:
            write_all(sock, views, advance(views, 0, sent), blocked)
        finally:
            forcing.discard(me)

    def flush(self) -> None:
        """Write the gathered frames now."""
        if self._out or self._gathered_bytes:
            with self.lock:
                try:                    # (_guarded inline: every step that sent something comes here)
                    self._write()
                except (FrameLimitReached, OSError) as exc:
                    self._failed(exc)

    def _guarded(self, write: Any, quiet: bool = False) -> None:
        """Call ``write`` (sealing or writing, under ``lock``); if it fails, see :meth:`_failed`."""
        try:
            write()
        except (FrameLimitReached, OSError) as exc:
            self._failed(exc, quiet)

    def _failed(self, exc: BaseException, quiet: bool = False) -> None:
        """Sealing or writing failed with ``exc`` (under ``lock``): fail the run naming the peer
        (FrameLimitReached as it is, an OSError as a WorkerFailure) and raise -- unless
        ``quiet`` (a heartbeat or goodbye) and the peer said goodbye or this side is closing:
        then there is nothing to tell."""
        self._drop_unwritten()
        if isinstance(exc, FrameLimitReached):
            self.mesh.fail(exc)
            raise exc
        if quiet and (self.goodbye.is_set() or self.mesh.closing):
            return
        # A peer that failed sent its error before closing: let the reading deliver
        # it first, so that the run reports the peer's error, not this pipe.
        self.reader_done.wait(PEER_ERROR_GRACE)
        if quiet and self.goodbye.is_set():
            return          # its goodbye was on the way when the pipe broke: the run is over there
        failure = WorkerFailure(f"cannot send to {self.describe()}: {exc}")
        self.mesh.fail(failure)
        raise failure from exc

    def heartbeat(self) -> None:
        """Tell the peer this process lives, unless that would wait: the heartbeat thread
        never waits for a connection a worker holds (it waits to send to a busy peer: the
        other peers must still hear us), never waits for room (frames are on their way
        then), and never reads (what is read ahead stays bounded); what the socket does not
        take at once goes to the writer thread."""
        if self.mesh.closing or not self.lock.acquire(blocking=False):
            return
        try:
            if self._behind.queued or self._behind.error is not None:
                return
            key = (CONTROL, 0, 0)           # (what send does, under the lock taken above)
            seq = self.seq[key]
            self.seq[key] = seq + 1
            self._no_wait = True
            try:
                self._guarded(lambda: self._seal_and_write(CONTROL, 0, 0, seq, HEARTBEAT, [], 0, False), True)
            except WorkerFailure:
                pass
            finally:
                self._no_wait = False
        finally:
            self.lock.release()

    def control(self, kind: int, body: bytes = b"") -> None:
        if kind == HEARTBEAT and self.mesh.closing:
            return                  # (the heartbeat thread may wake once more while the mesh closes)
        try:
            self.send(CONTROL, 0, 0, kind, [body])
        except WorkerFailure:
            pass

    # ---- reading --------------------------------------------------------------------
    def pump(self, reader: Optional[Allocator] = None, force: bool = False) -> bool:
        """Read whatever has arrived, without blocking, and deliver every whole message;
        whether anything was read.  ``reader``: the allocator of the worker whose thread
        reads, which takes the messages for itself straight into its inboxes (the others,
        and all of them when another thread reads, go to their workers' mailboxes; the
        reader empties its mailbox first, so that each channel stays in order).  Failures
        of the connection fail the run (naming the peer) and end its reading.  Reading stops
        once :data:`INBOUND_BYTES` of messages wait in mailboxes, unless ``force`` (a worker
        waiting to send; the shutdown).  Call under ``read_lock``."""
        if self.done_reading:
            return False
        mesh = self.mesh
        self._drained = False
        self._reader = reader
        self._force = force
        try:
            return self._pump()
        except _BadFrame as exc:
            mesh.fail(WorkerFailure(str(exc)))
        except (EOFError, OSError) as exc:
            if not self.goodbye.is_set() and not mesh.closing:
                mesh.fail(WorkerFailure(f"{self.describe()} closed the connection ({exc})"))
        except Exception as exc:  # a corrupt frame from an authenticated peer
            mesh.fail(WorkerFailure(f"bad frame from {self.describe()}: {exc}"))
        finally:
            self._reader = None
        self.goodbye.set()
        self.done_reading = True
        self.reader_done.set()
        return True

    def _recv(self, view: memoryview) -> int:
        """Bytes read into ``view`` (0: nothing there now); EOFError when the peer closed."""
        if self._drained:
            return 0
        try:
            n = self.sock.recv_into(view, view.nbytes, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return 0
        if n == 0:
            raise EOFError("connection closed")
        if n < view.nbytes:
            self._drained = True      # the socket had less than asked: nothing more now (saves a call)
        return n

    def _pump(self) -> bool:
        got = False
        limit = self.mesh.max_frame + INNER.size
        buf, view = self._buf, self._view
        bulk = 0                                # bytes of large frames read by this call
        while True:
            if self._big is not None:
                header, big, have = self._big
                if self._ahead_in - self._ahead_out >= self._ahead_limit and self._held():
                    break
                n = self._recv(big[have:])
                if not n:
                    break
                got = True
                have += n
                if have < len(big):
                    self._big = (header, big, have)
                    continue
                self._big = None
                self._frame(header, big, owned=True)
                bulk += have
                if bulk >= PUMP_BULK:           # let the worker use what came before reading more
                    break
                continue
            start, end = self._start, self._end
            while end - start >= HEADER.size:
                (length,) = HEADER.unpack_from(buf, start)
                if length > limit or length < INNER.size:
                    raise _BadFrame(f"{self.describe()} announced a frame of {length} bytes, over the limit of "
                                    f"{limit}" if length > limit else
                                    f"{self.describe()} sent a frame too short to be sealed")
                total = HEADER.size + length + TAG
                if end - start >= total:
                    self._frame(bytes(view[start:start + HEADER.size]), view[start + HEADER.size:start + total])
                    start += total
                    continue
                if total > STAGE:              # a large frame: into a buffer of its own, opened where it lies
                    big = self._receiving.take(length + TAG)
                    have = end - start - HEADER.size
                    big[:have] = view[start + HEADER.size:end]
                    self._big = (bytes(view[start:start + HEADER.size]), big, have)
                    start = end = 0
                break
            if self._big is not None:
                self._start = self._end = 0
                continue
            if start == end:
                start = end = 0
            elif start and STAGE - start < HEADER.size + TAG + (
                    HEADER.unpack_from(buf, start)[0] if end - start >= HEADER.size else 0):
                buf[:end - start] = view[start:end]
                start, end = 0, end - start
            self._start, self._end = start, end
            if self._drained:                  # the socket had no more a moment ago
                break
            if self._ahead_in - self._ahead_out >= self._ahead_limit and self._held():
                break                          # (only a part of a frame is left in the stage)
            try:                               # (_recv inline: every frame read comes here)
                n = self.sock.recv_into(view[end:], STAGE - end, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            if n == 0:
                raise EOFError("connection closed")
            if n < STAGE - end:
                self._drained = True           # less than asked: nothing more now (saves a call)
            got = True
            self._end = end + n
        if got:
            self.last_heard = self.last_frame = time.monotonic()
        return got

    def _frame(self, header: bytes, sealed: memoryview, owned: bool = False) -> None:
        """Open a whole frame (its tag checked before anything of it is used) and act on it;
        ``owned``: ``sealed`` is a buffer of its own, which the payload may keep."""
        plain = self._opener.open(header, sealed, in_place=owned)
        if plain is None:
            raise _BadFrame(f"a frame from {self.describe()} failed its integrity check (injected, altered, "
                            "reordered, replayed or dropped on the way)")
        channel, source, target, seq, kind = INNER.unpack_from(plain, 0)
        if channel == CONTROL and kind == BUNDLE:
            if self._pending:
                raise _BadFrame(f"{self.describe()} sent a bundle inside a message of several frames")
            at, end = INNER.size, plain.nbytes
            expected = self._expected
            reader = self._reader
            mine = -1 if reader is None else reader.index
            inboxes = {} if reader is None else reader.inboxes
            while at < end:                     # (each message as _message does, inline: the hot path)
                if end - at >= _SMALL_ITEM.size:     # its length, its header, a pickle's count of buffers
                    n, channel, source, target, seq, kind, count = _SMALL_ITEM.unpack_from(plain, at)
                    if n < _SMALL_ITEM.size - BUNDLED.size:
                        count = -1                   # (no count: those bytes are the next message's)
                elif end - at >= _ITEM.size:
                    n, channel, source, target, seq, kind = _ITEM.unpack_from(plain, at)
                    count = -1
                else:
                    raise _BadFrame(f"{self.describe()} sent a bundle cut short")
                if n < INNER.size or n > end - at - BUNDLED.size:
                    raise _BadFrame(f"{self.describe()} sent a bundle with a message of {n} bytes where "
                                    f"{end - at - BUNDLED.size} are left")
                if kind & MORE or (channel == CONTROL and kind == BUNDLE):
                    raise _BadFrame(f"{self.describe()} sent a partial message or a bundle in a bundle")
                start, at = at, at + BUNDLED.size + n
                if channel == CONTROL:
                    self._control(kind, plain[start + _ITEM.size:at])
                    continue
                key = (channel, source, target)
                if seq != expected[key]:             # (a defaultdict: a subscript, no get call)
                    raise ValueError(f"frame {seq} on channel {channel} from worker {source}, "
                                     f"expected {expected[key]}")
                expected[key] = seq + 1
                if count == 0 and kind == PICKLE:    # a pickle in band (as gather makes them): codec.decode inline
                    payload = pickle.loads(plain[start + _SMALL_ITEM.size:at])
                else:
                    payload = decode(kind, plain[start + _ITEM.size:at])
                if target == mine:
                    if channel in inboxes:                # (Allocator.deliver inline: one call less a message)
                        inbox = inboxes[channel]
                        inbox.queue.append(payload)
                        inbox.activate()
                    else:                                 # (a channel not allocated here yet)
                        reader.deliver(channel, payload)  # type: ignore[union-attr]
                else:
                    self._hand_over(target, channel, payload, at - start)
            return
        body = plain[INNER.size:]
        if kind & MORE:
            self._pending.append(body)
            return
        if self._pending:
            self._pending.append(body)
            body = memoryview(b"".join(self._pending))
            self._pending = []
        if channel == CONTROL:
            self._control(kind, body)
        else:
            self._message(channel, source, target, seq, kind, body)

    def _control(self, kind: int, body: memoryview) -> None:
        if kind == GOODBYE:
            self.goodbye.set()
        elif kind == ERROR:
            self.mesh.fail(self._relayed_error(body), remote=True)

    def _message(self, channel: int, source: int, target: int, seq: int, kind: int, body: memoryview) -> None:
        """Check a message's number on its channel, decode it and hand it to its worker."""
        key = (channel, source, target)
        expected = self._expected
        if seq != expected[key]:
            raise ValueError(f"frame {seq} on channel {channel} from worker {source}, "
                             f"expected {expected[key]}")
        expected[key] = seq + 1
        payload = decode(kind, body)
        reader = self._reader
        if reader is not None and target == reader.index:
            reader.deliver(channel, payload)
        else:
            self._hand_over(target, channel, payload, body.nbytes)

    def _hand_over(self, target: int, channel: int, payload: Any, nbytes: int) -> None:
        """Put a message for local worker ``target`` into its mailbox, counted as read ahead
        (``nbytes``) until the worker takes it (under ``read_lock``)."""
        mailboxes = self.mesh.fabric.mailboxes
        at = target - self._fabric_offset
        if not 0 <= at < len(mailboxes):
            raise _BadFrame(f"a message for worker {target}, not a worker of this process")
        self._ahead_in += nbytes                 # (first: its worker may take it at once)
        mailboxes[at].put(Counted(channel, payload, self, nbytes))

    def _relayed_error(self, body: memoryview) -> BaseException:
        """The error a peer reported (its frame authenticated): timely_spark's errors as
        they are (a WorkerError names the peer's worker); anything else as a failure of
        the peer."""
        exc = pickle.loads(body)
        if isinstance(exc, TimelyError):
            return exc
        return WorkerFailure(f"{self.describe()} failed: {exc!r}")

    def read_loop(self) -> None:
        """The watchdog thread: every so often (a quarter of ``peer_timeout``, at most
        POLL_INTERVAL) it reads what waits while no worker of this process does (so a
        peer's error, goodbye or closing is seen while the workers compute), and fails
        the run when the peer stayed silent for ``peer_timeout`` seconds.  Workers read
        the data themselves (waiting, stepping, or sending), so this thread never stands
        between a message and its worker."""
        mesh = self.mesh
        check = max(min(mesh.peer_timeout / HEARTBEATS_PER_PEER_TIMEOUT, POLL_INTERVAL), 0.001)
        while not self.reader_done.is_set() and not mesh.stopped():
            if mesh.stop_wait(check):
                break
            if not mesh.parked and self.read_lock.acquire(blocking=False):
                try:
                    self.pump()
                finally:
                    self.read_lock.release()
            if self.holding and self.hung_up():     # held: its end is seen without reading its data
                with self.read_lock:
                    self.read_to_end()
            if (not self.reader_done.is_set() and not self.goodbye.is_set()
                    and time.monotonic() - self.heard() > mesh.peer_timeout):
                with self.read_lock:       # what came meanwhile counts
                    self.pump()
                if time.monotonic() - self.heard() > mesh.peer_timeout and not self.goodbye.is_set():
                    mesh.fail(WorkerFailure(f"{self.describe()} went silent for {mesh.peer_timeout} s"))
                    self.done_reading = True
                    self.reader_done.set()


_ITEM = struct.Struct("<" + BUNDLED.format[1:] + INNER.format[1:])   # a bundled message's length and header
_SMALL_ITEM = struct.Struct(_ITEM.format + "I")   # ... and the count of a pickle in band (0: see codec.IN_BAND)


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
    bound listening socket (its address is ``addresses[process]``).  ``encrypt``: seal
    payloads (None: unless ``$TIMELY_SPARK_ENCRYPTION`` is ``off``; frames are
    authenticated either way); ``frame_limit``: frames per direction of a connection
    before it closes (:data:`~timely_spark.communication.aead.MAX_FRAMES_PER_KEY`);
    ``inbound_limit``: bytes of a peer's messages read ahead of the workers
    (:data:`INBOUND_BYTES`).
    """

    def __init__(self, process: int, addresses: list[tuple[str, int]], listener: socket.socket, secret: bytes,
                 fabric: ThreadFabric, threads: int, peer_timeout: float = DEFAULT_PEER_TIMEOUT,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, max_frame: int = MAX_FRAME,
                 handshake_timeout: float = HANDSHAKE_TIMEOUT, encrypt: Optional[bool] = None,
                 frame_limit: int = MAX_FRAMES_PER_KEY, inbound_limit: int = INBOUND_BYTES) -> None:
        if not secret:
            raise ValueError("the mesh needs a non-empty secret")
        self.process = process
        self.addresses = [(str(h), int(p)) for h, p in addresses]
        self.listener = listener
        self.secret = secret
        self.local_listener = bind_local(secret, *self.addresses[process])   # beside it, for peers on this host
        self.fabric = fabric
        self.threads = threads
        self.peer_timeout = peer_timeout
        self.connect_timeout = connect_timeout
        self.max_frame = max_frame
        self.handshake_timeout = handshake_timeout
        self.magic = mesh_magic(encrypt)
        self.frame_limit = frame_limit
        if inbound_limit <= 0:
            raise ValueError(f"inbound_limit must be a positive number of bytes, not {inbound_limit!r}")
        self.inbound_limit = inbound_limit
        self.forcing: set[int] = set()           # threads that wait to send, reading every connection past the bound
        self._pending = PendingHandshakes(MAX_HANDSHAKES)
        self._mismatch: Optional[str] = None     # an authenticated peer in the other encryption mode
        self.connections: dict[int, _Connection] = {}
        self.closing = False
        self.parked: set[int] = set()     # local workers waiting on the sockets themselves (they read)
        self.unwritten: set[_Connection] = set()   # connections that gathered frames not yet written (see flush)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._threads: list[threading.Thread] = []
        self.rejected: deque[str] = deque(maxlen=REJECTIONS_KEPT)   # why connections were refused (the latest)

    def stopped(self) -> bool:
        """Whether the mesh is shutting down."""
        return self._stop.is_set()

    def stop_wait(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for the shutdown; whether it began."""
        return self._stop.wait(seconds)

    # ---- establishing ---------------------------------------------------------------
    def connect(self) -> None:
        """Connect to every peer (authenticated) or raise WorkerFailure by the deadline."""
        deadline = time.monotonic() + self.connect_timeout
        self.start_accepting()
        for j in range(self.process):
            self._connect_to(j, deadline)
        with self._ready:
            while len(self.connections) < len(self.addresses) - 1:
                if self._mismatch is not None:
                    raise WorkerFailure(self._mismatch)
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
        """Connect to process ``j`` and authenticate; a refused connection, or a handshake
        that is closed or times out (the listener's handshake slots may be held by
        others), is tried again until ``deadline``.  A process on this host (the same host
        in the addresses) is connected through its local socket (:mod:`.local_socket`; up
        to LOCAL_WAIT seconds for it to appear), or over TCP if that fails."""
        host, port = self.addresses[j]
        delay = RETRY_BACKOFF
        local = host == self.addresses[self.process][0] and local_name(self.secret, host, port) is not None
        local_until = min(deadline, time.monotonic() + LOCAL_WAIT)
        while True:
            if local:
                wait = max(POLL_INTERVAL, min(self.handshake_timeout, deadline - time.monotonic()))
                sock = connect_local(self.secret, host, port, wait)
                if sock is not None:
                    try:
                        magic, challenge, mine = self._handshake_out(sock, j, deadline)
                        break
                    except (OSError, EOFError, WorkerFailure):
                        local = False           # no peer of this run there, or no handshake: TCP
                        continue
                if time.monotonic() + delay < local_until:
                    time.sleep(delay)           # not there yet: the peer binds it as its mesh starts
                    delay = min(delay * 2, MAX_RETRY_BACKOFF)
                    continue
                local, delay = False, RETRY_BACKOFF
            try:
                wait = max(POLL_INTERVAL, min(self.handshake_timeout, deadline - time.monotonic()))
                sock = socket.create_connection((host, port), timeout=wait)
                magic, challenge, mine = self._handshake_out(sock, j, deadline)
                break
            except WorkerFailure:
                raise
            except (OSError, EOFError) as exc:
                if self._mismatch is not None:
                    raise WorkerFailure(self._mismatch) from exc
                if time.monotonic() + delay > deadline:
                    raise WorkerFailure(f"process {self.process}: cannot connect to and authenticate with process "
                                        f"{j} at {host}:{port} within {self.connect_timeout} s ({exc})") from exc
                time.sleep(delay)
                delay = min(delay * 2, MAX_RETRY_BACKOFF)
        send_key, recv_key = frame_keys(self.secret, challenge, mine, magic)
        with self._ready:
            self.connections[j] = _Connection(self, sock, j, send_key, recv_key, magic)
            self._ready.notify_all()

    def _handshake_out(self, sock: socket.socket, j: int, deadline: float) -> tuple[bytes, bytes, bytes]:
        """The connecting side's handshake with process ``j`` on ``sock`` (closed if it
        fails): the greeting the two use, the listener's challenge and this side's nonce.
        WorkerFailure for a listener that is not a mesh, that is in the other encryption
        mode (after sending this side's proof, so that it can name the mismatch too) or
        that does not prove the secret; OSError or EOFError for a closed or slow one."""
        host, port = self.addresses[j]
        magic = self.magic
        try:
            until = min(time.monotonic() + self.handshake_timeout, deadline)
            hello = recv_exact(sock, len(magic) + NONCE, until)
            theirs = bytes(hello[:len(magic)])
            if not theirs.startswith(PREFIX) or mode(theirs) is None:
                raise WorkerFailure(f"{host}:{port} is not a timely_spark mesh listener")
            challenge = bytes(hello[len(magic):])
            mine = os.urandom(NONCE)
            me = struct.pack("<I", self.process)
            proof = me + mine + handshake_mac(self.secret, b"connect", challenge, me, mine)
            if mode(theirs)[1] != mode(magic)[1]:     # type: ignore[index]
                sock.sendall(magic + proof)           # in this side's mode: the listener names the mismatch
                said = "encrypts" if mode(theirs)[1] else "does not encrypt"     # type: ignore[index]
                raise WorkerFailure(f"process {j} at {host}:{port} {said} its frames and this process "
                                    f"{'does' if mode(magic)[1] else 'does not'}: set TIMELY_SPARK_ENCRYPTION "  # type: ignore[index]
                                    "the same for every process of the run")
            magic = theirs                      # the acceptor names the cipher
            sock.sendall(magic + proof)
            answer = bytes(recv_exact(sock, MAC, until))
            them = struct.pack("<I", j)
            if not hmac.compare_digest(answer, handshake_mac(self.secret, b"accept", mine, challenge, them)):
                raise WorkerFailure(f"the listener at {host}:{port} (process {j}) did not prove the run's secret: "
                                    "refusing to join it")
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        return magic, challenge, mine

    def start_accepting(self) -> None:
        """Start the threads that accept and authenticate peers (``connect`` does): on the
        TCP listener, and on the local socket beside it for peers on this host
        (:mod:`.local_socket`)."""
        for listener, name in ((self.listener, "accept"), (self.local_listener, "accept-local")):
            if listener is not None:
                acceptor = threading.Thread(target=self._accept_loop, args=(listener,),
                                            name=f"timely-{name}-{self.process}", daemon=True)
                acceptor.start()
                self._threads.append(acceptor)

    def _accept_loop(self, listener: socket.socket) -> None:
        """Accept connections on ``listener`` until stopped; transient errors (EMFILE,
        ECONNABORTED...) back off and go on.  Each connection's handshake runs in its own
        thread, at most MAX_HANDSHAKES at once (see :meth:`_admit`)."""
        listener.settimeout(POLL_INTERVAL)
        backoff = RETRY_BACKOFF
        while not self._stop.is_set():
            try:
                sock, addr = listener.accept()
            except socket.timeout:
                continue
            except OSError as exc:
                if self._stop.is_set() or listener.fileno() < 0:
                    return
                log.warning("timely_spark mesh, process %d: accept failed (%s); retrying", self.process, exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_RETRY_BACKOFF)
                continue
            backoff = RETRY_BACKOFF
            if sock.family == socket.AF_UNIX:
                addr = "a local socket"
                if not same_user(sock):
                    self._refuse(sock, addr, "its process runs as another user")
                    continue
            self._admit(sock, addr)
            try:
                threading.Thread(target=self._bounded_handshake, args=(sock, addr), daemon=True).start()
            except RuntimeError as exc:      # no thread to be had
                self._pending.authenticated(sock)
                self._refuse(sock, addr, f"cannot start its handshake ({exc})")

    def _admit(self, sock: socket.socket, addr: Any) -> None:
        """Count ``sock`` among the handshakes under way (see :mod:`.pending`)."""
        dropped = self._pending.admit(sock, str(addr[0]) if isinstance(addr, tuple) and addr else str(addr))
        if dropped is not None:
            self.rejected.append(f"{dropped}: dropped its oldest handshake (over {MAX_HANDSHAKES} under way)")

    def _bounded_handshake(self, sock: socket.socket, addr: Any) -> None:
        try:
            self._handshake(sock, addr)
        finally:
            self._pending.authenticated(sock)

    def _refuse(self, sock: socket.socket, addr: Any, why: str) -> None:
        self.rejected.append(f"{addr}: {why}")
        log.warning("timely_spark mesh, process %d: refused a connection from %s: %s", self.process, addr, why)
        try:
            sock.close()
        except OSError:
            pass

    def _handshake(self, sock: socket.socket, addr: Any) -> None:
        magic = self.magic
        try:
            until = time.monotonic() + self.handshake_timeout
            sock.settimeout(self.handshake_timeout)
            challenge = os.urandom(NONCE)
            sock.sendall(magic + challenge)
            reply = bytes(recv_exact(sock, len(magic) + 4 + NONCE + MAC, until))
        except socket.timeout:
            return self._refuse(sock, addr, f"handshake not done within {self.handshake_timeout} s")
        except (OSError, EOFError) as exc:
            return self._refuse(sock, addr, f"no valid greeting ({exc})")
        greeted = bytes(reply[:len(magic)])
        me_bytes = reply[len(magic):len(magic) + 4]
        theirs = reply[len(magic) + 4:len(magic) + 4 + NONCE]
        mac = reply[len(magic) + 4 + NONCE:]
        proven = hmac.compare_digest(mac, handshake_mac(self.secret, b"connect", challenge, me_bytes, theirs))
        if greeted != magic:
            other = mode(greeted) if greeted.startswith(PREFIX) else None
            if proven and other is not None and other[1] != mode(magic)[1]:     # type: ignore[index]
                (peer,) = struct.unpack("<I", me_bytes)
                where = '{}:{}'.format(*self.addresses[peer]) if peer < len(self.addresses) else str(addr)
                said = "encrypts" if other[1] else "does not encrypt"
                with self._ready:
                    self._mismatch = (f"process {peer} at {where} {said} its frames and this process "
                                      f"{'does not' if other[1] else 'does'}: set TIMELY_SPARK_ENCRYPTION the same "
                                      f"for every process of the run")
                    self._ready.notify_all()
                return self._refuse(sock, addr, self._mismatch)
            return self._refuse(sock, addr, "not a timely_spark peer in this mode (bad greeting)")
        if not proven:
            return self._refuse(sock, addr, "failed authentication (wrong secret, or another run)")
        (peer,) = struct.unpack("<I", me_bytes)
        if not self._pending.authenticated(sock):
            return self._refuse(sock, addr, "authenticated, but its handshake was dropped meanwhile")
        with self._ready:
            if self._stop.is_set():             # the mesh shut down meanwhile: nobody would close this one
                return self._refuse(sock, addr, "the mesh has shut down")
            if not self.process < peer < len(self.addresses):
                return self._refuse(sock, addr, f"authenticated, but process index {peer} is not expected here")
            if peer in self.connections:
                return self._refuse(sock, addr, f"authenticated, but process {peer} is already connected")
            try:
                sock.sendall(handshake_mac(self.secret, b"accept", theirs, challenge, struct.pack("<I", self.process)))
                sock.settimeout(None)
            except OSError as exc:
                return self._refuse(sock, addr, f"handshake failed ({exc})")
            connector_to_us, us_to_connector = frame_keys(self.secret, challenge, theirs, magic)
            self.connections[peer] = _Connection(self, sock, peer, send_key=us_to_connector,
                                                 recv_key=connector_to_us, magic=magic)
            self._ready.notify_all()

    # ---- running ----------------------------------------------------------------------
    def _heartbeat_loop(self) -> None:
        interval = max(self.peer_timeout / HEARTBEATS_PER_PEER_TIMEOUT, MIN_HEARTBEAT_INTERVAL)
        while not self._stop.wait(interval):
            for conn in list(self.connections.values()):
                conn.heartbeat()

    def flush(self) -> None:
        """Write every connection's gathered frames: those of the connections that gathered
        some since they last wrote (a step that sent nothing to another process costs no
        call per connection)."""
        unwritten = self.unwritten
        while unwritten:
            try:
                conn = unwritten.pop()
            except KeyError:            # another worker of this process took the last one
                break
            conn.flush()

    def pump(self) -> None:
        """Read and deliver what has arrived on every connection, without blocking."""
        for conn in self.connections.values():
            if not conn.reader_done.is_set():
                with conn.read_lock:
                    conn.pump()

    def read_all(self, force: bool = False) -> None:
        """Read every connection that no other thread reads now, without blocking (``force``:
        past the bound of what is read ahead: see :meth:`_Connection.pump`)."""
        for conn in list(self.connections.values()):
            if not conn.done_reading and conn.read_lock.acquire(blocking=False):
                try:
                    conn.pump(None, force)
                finally:
                    conn.read_lock.release()

    def read_fds(self) -> list[int]:
        """The sockets of the connections still read."""
        return [fd for fd in (c.sock.fileno() for c in list(self.connections.values()) if not c.done_reading)
                if fd >= 0]

    def read_ahead(self, peer: int) -> int:
        """Bytes of process ``peer``'s messages read and waiting in this process's mailboxes,
        not yet taken by their workers (at most about ``inbound_limit`` while no worker here
        waits to send)."""
        return self.connections[peer].read_ahead

    def wait_readable(self, conns: list, done: Any, deadline: float) -> None:
        """Read the connections ``conns`` as data arrives until ``done(conn)`` holds for
        each (or it ended), or until ``deadline``."""
        waiter = select.poll()
        by_fd = {}
        for c in conns:
            if c.sock.fileno() >= 0:
                by_fd[c.sock.fileno()] = c
                waiter.register(c.sock.fileno(), select.POLLIN)
        while True:
            left = [c for c in by_fd.values() if not done(c) and not c.reader_done.is_set()]
            now = time.monotonic()
            if not left or now >= deadline:
                return
            for fd, _ in waiter.poll(min(deadline - now, POLL_INTERVAL) * 1000.0):
                c = by_fd[fd]
                with c.read_lock:
                    c.pump(None, True)          # (the shutdown: nobody takes what waits any more)
                if c.reader_done.is_set():
                    waiter.unregister(fd)

    def connection_for(self, worker: int) -> _Connection:
        """The connection to the process that hosts global worker ``worker``."""
        return self.connections[worker // self.threads]

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
            self.wait_readable([c for c in self.connections.values()], lambda c: c.goodbye.is_set(), deadline)
        for conn in list(self.connections.values()):   # what is queued goes first (a failure's report included)
            conn.end_writing(self.peer_timeout if clean else PEER_ERROR_GRACE)
        self.closing = True
        with self._ready:                              # no handshake adds a connection after this
            self._stop.set()
        for conn in list(self.connections.values()):
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self._threads:                        # the readers end (they use the sockets)
            if t is not threading.current_thread() and t.name.startswith("timely-read"):
                t.join(timeout=THREAD_JOIN_WAIT)
        for conn in list(self.connections.values()):
            with conn.read_lock:
                conn.done_reading = True
                conn.reader_done.set()
                conn.sock.close()
        for listener in (self.listener, self.local_listener):
            if listener is None:
                continue
            try:
                listener.shutdown(socket.SHUT_RDWR)    # wakes the accept loop at once (Linux)
            except OSError:
                pass
            listener.close()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=THREAD_JOIN_WAIT)


class _TcpPusher:
    __slots__ = ("_conn", "_channel", "_source", "_target", "_key", "_gather", "_out_of_band")

    def __init__(self, conn: _Connection, channel: int, source: int, target: int) -> None:
        self._conn = conn
        self._channel = channel
        self._source = source
        self._target = target
        self._key = (channel, source, target)
        self._gather = conn.gather
        self._out_of_band: list = []        # (a list's buffers out of band, if it has any)

    def push(self, payload: Any) -> None:
        """Send a message to a worker of another process (gathered until the worker's step ends or it waits)."""
        kind = 0
        plain = type(payload) is list       # a progress batch
        if not plain and type(payload) is tuple and payload:
            data = payload[-1]              # a batch (time, records) of records not Arrow's (codec.encode's test,
            plain = type(data) is list and bool(data) and type(data[0]) in _NOT_ARROW   # without its calls)
        if plain:                           # pickled as codec.encode does, without its calls
            out_of_band = self._out_of_band
            pickled = _dumps(payload, protocol=5, buffer_callback=out_of_band.append)
            if not out_of_band:             # all of it in band
                if len(pickled) < _SMALL:
                    self._gather(self._key, pickled)
                    return
                kind, parts = PICKLE, [IN_BAND, pickled]
            else:                           # (buffers out of band: the parts of codec.encode, pickled once)
                kind, parts = pickle_parts(pickled, out_of_band)
                out_of_band.clear()
        if not kind:
            kind, parts = encode(payload)
        if parts[0] is IN_BAND and len(parts[1]) < _SMALL:     # (a progress batch, a few records)
            self._gather(self._key, parts[1])
        else:
            self._conn.send(self._channel, self._source, self._target, kind, parts, gather=True)


_SMALL = BUNDLE_BELOW - len(IN_BAND)    # a pickle in band shorter than this is a small message
_NOT_ARROW = frozenset((int, float, str, bytes, bool, tuple, list, dict, type(None)))   # records encode pickles
_dumps = pickle.dumps


class TcpAllocator(Allocator):
    """Allocator for global worker ``index``: in-process peers through mailboxes,
    other processes through the mesh.  Waiting for messages, the worker waits on its
    mailbox and the mesh's sockets at once, and reads what arrives itself."""

    def __init__(self, index: int, fabric: ThreadFabric, mesh: Mesh, peers: int) -> None:
        super().__init__(index, peers, fabric.mailboxes[index - fabric.offset])
        self._pollable = isinstance(self.mailbox, Mailbox)   # (asked once, not at every receive)
        self.fabric = fabric
        self.mesh = mesh
        self._poller: Optional[Any] = None
        self._polled: dict[int, _Connection] = {}
        self._held: dict[int, _Connection] = {}    # held sockets, polled for HANG_UP only meanwhile

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

    def release(self) -> None:
        """Write what this step gathered for other processes."""
        unwritten = self.mesh.unwritten
        while unwritten:                  # (Mesh.flush inline: every step that sent something comes here)
            try:
                conn = unwritten.pop()
            except KeyError:              # another worker of this process took the last one
                break
            conn.flush()

    def receive(self, timeout: Optional[float] = None) -> bool:
        """Read what arrived on the sockets and move arrived messages into their
        inboxes (writing what was gathered first if it is to wait); with a ``timeout``, first wait up to that long for
        one -- on the mailbox and the sockets at once, reading the sockets in this thread
        (no hand-off to another thread: the worker wakes as the bytes arrive)."""
        mesh = self.mesh
        if timeout and mesh.unwritten:        # about to wait: what was gathered goes first (a step's
            mesh.flush()                      # start does not flush: its end does, data and progress at once)
        mailbox: Mailbox = self.mailbox       # type: ignore[assignment]   # (a Mailbox when _pollable)
        if not self._pollable or not mesh.connections:
            return super().receive(timeout)
        poller = self._poller
        if poller is None:
            poller = self._poller = select.poll()
            poller.register(mailbox.fileno(), select.POLLIN)
            for conn in mesh.connections.values():
                fd = conn.sock.fileno()
                if fd >= 0:
                    poller.register(fd, select.POLLIN)
                    self._polled[fd] = conn
        fabric = self.fabric
        if fabric.failure is not None:
            self.check()
        empty = mailbox.empty                 # (a drain only when the mailbox holds something: no call else)
        if self._held:
            timeout = self._release_held(timeout)
        if not timeout:                       # a stepping worker: the sockets, then one pass over the mailbox
            got = self._read(poller.poll(0))
            return (not empty() and self.drain()) or got
        mailbox.parked = True                 # (first: a message put from now on signals the poller, so
        mesh.parked.add(self.index)           # one look at the mailbox before waiting is enough)
        events: list = []                     # (and the watchdog threads leave reading to us)
        try:
            if not empty() or fabric.failure is not None:
                events = poller.poll(0)       # something is there already: the sockets too, without waiting
            else:
                events = poller.poll(timeout * 1000.0)
        finally:
            mailbox.parked = False            # what we deliver ourselves needs no wake-up signal
            mesh.parked.discard(self.index)
        if fabric.failure is not None:
            self.check()
        got = self._read(events)
        return (not empty() and self.drain()) or got

    def _read(self, events: list) -> bool:
        """Read the connections that ``events`` name, taking this worker's messages
        straight into its inboxes (after what waited in its mailbox: another thread may
        have read the same connection before); whether anything was read."""
        got = False
        for fd, _ in events:
            conn = self._polled.get(fd)
            if conn is None and fd in self._held:   # a held socket hung up (its data unread)
                conn = self._held.pop(fd)
                self._poller.unregister(fd)     # type: ignore[union-attr]
                with conn.read_lock:
                    if not self.mailbox.empty():
                        self.drain()
                    conn.read_to_end(self)
                if not conn.done_reading:       # (not seen to its end: watched for data again, as any socket)
                    self._poller.register(fd, select.POLLIN)     # type: ignore[union-attr]
                    self._polled[fd] = conn
                got = True
            elif conn is None:
                self.mailbox.clear_signal()     # type: ignore[attr-defined]
            elif conn.done_reading:
                self._poller.unregister(fd)     # type: ignore[union-attr]   # ended: nothing more to read there
                del self._polled[fd]
            else:
                with conn.read_lock:
                    if not self.mailbox.empty():
                        self.drain()
                    got = conn.pump(self) or got
                if conn.holding:                # (its socket stays readable: watched for its end only)
                    self._poller.register(fd, HANG_UP)     # type: ignore[union-attr]
                    self._held[fd] = self._polled.pop(fd)
        return got

    def _release_held(self, timeout: Optional[float]) -> Optional[float]:
        """Poll the held sockets whose workers took enough for data again (held, they are
        polled for HANG_UP only), and stop polling those read to their end; the wait
        for what remains held: at most POLL_INTERVAL (no signal says when another worker
        takes its messages; that worker reads the connection itself meanwhile)."""
        for fd, conn in list(self._held.items()):
            if conn.done_reading or not conn.holding:
                del self._held[fd]
                if not conn.done_reading:
                    self._poller.register(fd, select.POLLIN)   # type: ignore[union-attr]
                    self._polled[fd] = conn
                else:
                    self._poller.unregister(fd)                # type: ignore[union-attr]
        if self._held and timeout:
            return min(timeout, POLL_INTERVAL)
        return timeout

    def close(self) -> None:
        """Write anything still gathered."""
        try:
            self.mesh.flush()
        except WorkerFailure:
            pass

    def check(self) -> None:
        """Raise WorkerAborted if the run failed elsewhere (checked at every receive)."""
        failure = self.fabric.failure
        if failure is not None and failure[0] != self.index:
            raise WorkerAborted(f"the run failed: {failure[1]}")
