"""The driver's rendezvous: real sockets, the tasks' side called from threads (and an
attacker's side written here from the protocol); and ts.spark.run meeting through it
or, when told, through allGather."""

import json
import os
import socket
import struct
import threading
import time

import pytest

import timely_spark as ts
from timely_spark.communication.aead import TAG, Opener
from timely_spark.communication.tcp import handshake_mac, recv_exact
from timely_spark.spark import rendezvous
from timely_spark.spark.job_errors import timely_cause
from timely_spark.spark.rendezvous import (
    MAGIC,
    RENDEZVOUS_CONF,
    DriverRendezvous,
    RendezvousError,
    Ticket,
    driver_rendezvous,
    failure_marker,
    meet,
    report_failure,
    report_stats,
)


@pytest.fixture(scope="module")
def service():
    return driver_rendezvous("127.0.0.1")     # the driver process's own (as the Spark jobs use)


def start_meeting(ticket, workers, stage=1, only=None, first_task=0, port=5000):
    """Tasks ``only`` (default: all) of ``workers`` meeting from threads, as barrier tasks
    with task attempt ids ``first_task + index`` and listeners on ``port + index``:
    ``(threads, results, errors)``, the threads started."""
    results, errors = {}, {}

    def task(i):
        try:
            results[i] = meet(ticket, stage, first_task + i, i, workers, "127.0.0.1", port + i)[0]
        except Exception as exc:
            errors[i] = exc

    threads = [threading.Thread(target=task, args=(i,)) for i in (only if only is not None else range(workers))]
    for t in threads:
        t.start()
    return threads, results, errors


def meet_all(ticket, workers, **kwargs):
    threads, results, errors = start_meeting(ticket, workers, **kwargs)
    for t in threads:
        t.join(60)
    return results, errors


def authenticated_request(ticket, request, length=None):
    """Send ``request`` as a task holding ``ticket`` would, the protocol written out here
    (an attacker who knows the job's secret; bytes are sent as they are, sealed); the raw
    answer's bytes, b"" if none.
    ``length`` announces another length than the request's."""
    with socket.create_connection((ticket.host, ticket.port), timeout=10) as sock:
        nonce = os.urandom(32)
        sock.sendall(MAGIC + ticket.token + nonce)
        hello = bytes(recv_exact(sock, 1 + 32 + 32, time.monotonic() + 10))
        nonces = nonce + hello[1:33]
        body = request if isinstance(request, bytes) else json.dumps(request).encode()
        header = struct.pack("<I", len(body) if length is None else length)
        up, down = rendezvous.message_keys(ticket.secret, ticket.token, nonces, MAGIC)
        sock.sendall(header + b"".join(bytes(p) for p in up.seal(header, [body])))
        try:
            answer = recv_exact(sock, 4, time.monotonic() + 10)
            answer += recv_exact(sock, struct.unpack("<I", answer)[0] + TAG, time.monotonic() + 10)
        except (OSError, EOFError):
            return b""
        opened = Opener(down.key, down.cipher).open(bytes(answer[:4]), memoryview(answer)[4:])
        return bytes(opened)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_every_task_learns_every_address_in_task_order(service, workers):
    ticket = service.open(b"s" * 32, wait=20)
    results, errors = meet_all(ticket, workers)
    assert not errors
    assert results == {i: [("127.0.0.1", 5000 + j) for j in range(workers)] for i in range(workers)}
    again, _ = meet_all(ticket, workers, stage=2)          # the next stage of the same job meets anew
    assert again == results
    service.close(ticket)


def test_a_task_with_the_wrong_secret_is_refused_and_the_service_goes_on(service):
    ticket = service.open(b"right" * 8, wait=20)
    forged = Ticket(ticket.host, ticket.port, ticket.token, b"wrong" * 8, ticket.wait)
    with pytest.raises(RendezvousError, match="did not prove it knows the job's secret"):
        meet(forged, 1, 0, 0, 1, "127.0.0.1", 1)
    unknown = Ticket(ticket.host, ticket.port, b"x" * 16, ticket.secret, ticket.wait)
    with pytest.raises(RendezvousError, match="does not know this job"):
        meet(unknown, 1, 0, 0, 1, "127.0.0.1", 1)
    with socket.create_connection((ticket.host, ticket.port)) as junk:   # garbage, then a hang-up
        junk.sendall(b"GET / HTTP/1.0\r\n\r\n")
    assert meet(ticket, 1, 0, 0, 1, "127.0.0.1", 7)[0] == [("127.0.0.1", 7)]
    service.close(ticket)


def test_a_missing_task_is_named_within_the_wait(service):
    ticket = service.open(b"s" * 32, wait=1)
    results, errors = meet_all(ticket, 3, only=[0, 2])
    assert not results
    assert all("only 2 of 3 tasks reached the driver's rendezvous within 1 s (missing: [1])" in str(e)
               for e in errors.values()) and len(errors) == 2


def test_an_unreachable_driver_is_a_clear_error():
    with socket.socket() as s:                  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ticket = Ticket("127.0.0.1", port, b"t" * 16, b"s" * 32, wait=0.5)
    with pytest.raises(RendezvousError, match=f"cannot reach the driver's rendezvous at 127.0.0.1:{port}.*"
                                              f"{RENDEZVOUS_CONF}=allGather"):
        meet(ticket, 1, 0, 0, 1, "127.0.0.1", 1)


def sealed(sealer, message):
    """``message`` as the protocol sends it: length, sealed JSON, tag."""
    body = json.dumps(message).encode()
    header = struct.pack("<I", len(body))
    return header + b"".join(bytes(p) for p in sealer.seal(header, [body]))


class DriverPeer:
    """A driver-side peer written here from the protocol, on 127.0.0.1: on every
    connection it proves the job's secret in its hello, reads the task's request and
    sends ``reply(keys)`` (bytes; ``keys(secret)`` is the sealer of the driver's answers
    under ``secret``), then hangs up (``hang_up``) or waits (bounded) for the task to."""

    def __init__(self, reply, hang_up=False, secret=b"s" * 32, token=b"t" * 16):
        self.reply, self.hang_up, self.secret, self.token = reply, hang_up, secret, token
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def ticket(self, wait):
        return Ticket("127.0.0.1", self.port, self.token, self.secret, wait)

    def _serve(self):
        while not self.stop.is_set():
            try:
                sock, _ = self.listener.accept()
            except socket.timeout:
                continue
            with sock:
                self.connections += 1
                deadline = time.monotonic() + 10
                hello = bytes(recv_exact(sock, len(MAGIC) + 16 + 32, deadline))
                magic, nonces = hello[:len(MAGIC)], hello[len(MAGIC) + 16:] + os.urandom(32)
                sock.sendall(b"+" + nonces[32:] + handshake_mac(self.secret, b"hello", self.token, nonces))
                (n,) = struct.unpack("<I", recv_exact(sock, 4, deadline))
                recv_exact(sock, n + TAG, deadline)
                sock.sendall(self.reply(lambda secret: rendezvous.message_keys(secret, self.token, nonces, magic)[1]))
                if self.hang_up:
                    continue
                sock.settimeout(10)
                try:
                    while sock.recv(1 << 16):       # until the task hangs up
                        pass
                except OSError:
                    pass

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(30)
        self.listener.close()
        assert not self.thread.is_alive()


ADDRESSES = {"addresses": [["127.0.0.1", 5000 + i] for i in range(100)], "attempt": 0}


def test_an_answer_over_the_tasks_cap_is_refused_naming_its_size_and_the_cap(monkeypatch):
    size = len(json.dumps(ADDRESSES).encode())
    monkeypatch.setattr(rendezvous, "MAX_ANSWER", 1000)        # read at each answer
    with DriverPeer(lambda keys: sealed(keys(b"s" * 32), ADDRESSES)) as driver:   # knows the secret
        with pytest.raises(RendezvousError) as refused:
            meet(driver.ticket(wait=5), 1, 0, 0, 100, "127.0.0.1", 1)
        assert driver.connections == 1                         # refused, not tried again
    message = str(refused.value)
    assert f"the driver's rendezvous at 127.0.0.1:{driver.port}" in message
    assert f"answer of {size} bytes, over this task's cap of 1000 bytes (rendezvous.MAX_ANSWER)" in message
    assert "secret" not in message
    monkeypatch.setattr(rendezvous, "MAX_ANSWER", size)        # the same answer within the cap is taken
    with DriverPeer(lambda keys: sealed(keys(b"s" * 32), ADDRESSES)) as driver:
        assert meet(driver.ticket(wait=5), 1, 0, 0, 100, "127.0.0.1", 1)[0][99] == ("127.0.0.1", 5099)


def test_an_answer_sealed_without_the_secret_is_refused_as_such():
    # the peer proves the secret in its hello, but seals its answer under another one
    with DriverPeer(lambda keys: sealed(keys(b"w" * 32), ADDRESSES)) as driver:
        with pytest.raises(RendezvousError, match=f"rendezvous at 127.0.0.1:{driver.port} answered without "
                                                  f"proving it knows the job's secret"):
            meet(driver.ticket(wait=5), 1, 0, 0, 1, "127.0.0.1", 1)
        assert driver.connections == 1


def test_an_answer_cut_short_says_the_driver_closed_the_connection():
    size = len(json.dumps(ADDRESSES).encode())
    with DriverPeer(lambda keys: sealed(keys(b"s" * 32), ADDRESSES)[:100], hang_up=True) as driver:
        with pytest.raises(RendezvousError) as refused:
            meet(driver.ticket(wait=0.5), 1, 0, 0, 1, "127.0.0.1", 1)
        assert driver.connections >= 2                         # dropped: tried again within the wait
    message = str(refused.value)
    assert f"the last: the connection closed before all of its {size}-byte answer came" in message
    assert "busy" in message and "secret" not in message


def test_a_driver_that_never_answers_is_named_within_the_bound(monkeypatch):
    monkeypatch.setattr(rendezvous, "HANDSHAKE_TIMEOUT", 0.5)     # the answer's wait past the ticket's
    with DriverPeer(lambda keys: b"") as driver:               # reads the request, answers nothing
        with pytest.raises(RendezvousError) as refused:
            meet(driver.ticket(wait=0.5), 1, 0, 0, 1, "127.0.0.1", 1)
        assert driver.connections == 1                         # timed out: past the wait, not tried again
    message = str(refused.value)
    assert "the last: the length of its answer did not come within" in message
    assert "busy" not in message and "closed" not in message


NOT_PAIRS = "answered with 'addresses' that are not a list of 1 [host, port] pairs"


@pytest.mark.parametrize("answer, wrong", [
    ([["127.0.0.1", 5000]], "answered with a JSON array, not an object"),
    (7, "answered with a JSON number, not an object"),
    ({"attempt": 0}, "answered without 'addresses'"),
    ({"addresses": [["127.0.0.1", 5000]]}, "answered without 'attempt'"),
    ({"addresses": "127.0.0.1:5000", "attempt": 0}, NOT_PAIRS),
    ({"addresses": [["127.0.0.1", 5000]] * 2, "attempt": 0}, NOT_PAIRS),
    ({"addresses": [["127.0.0.1"]], "attempt": 0}, NOT_PAIRS),
    ({"addresses": [["127.0.0.1", "a port"]], "attempt": 0}, NOT_PAIRS),
    ({"addresses": [["127.0.0.1", 5000]], "attempt": "first"}, "answered with an 'attempt' that is not an int"),
])
def test_an_authenticated_answer_off_the_protocol_is_named(answer, wrong):
    # sealed under the job's secret, valid JSON, yet not the meet answer's shape
    with DriverPeer(lambda keys: sealed(keys(b"s" * 32), answer)) as driver:
        with pytest.raises(RendezvousError) as refused:
            meet(driver.ticket(wait=5), 1, 0, 0, 1, "127.0.0.1", 1)
        assert driver.connections == 1                         # refused, not tried again
    message = str(refused.value)
    assert f"the driver's rendezvous at 127.0.0.1:{driver.port}" in message
    assert wrong in message and "same timely_spark version" in message


def test_a_request_over_the_drivers_cap_is_refused_by_the_task_before_it_connects(service):
    from timely_spark.spark.rendezvous import RENDEZVOUS_MAX_REQUEST

    ticket = service.open(b"s" * 32, wait=20)
    with pytest.raises(RendezvousError, match=f"'meet' request to the driver's rendezvous at 127.0.0.1:"
                                              f"{ticket.port} is \\d+ bytes, over the driver's cap of "
                                              f"{RENDEZVOUS_MAX_REQUEST} bytes"):
        meet(ticket, 1, 0, 0, 1, "h" * RENDEZVOUS_MAX_REQUEST, 1)
    assert meet(ticket, 1, 0, 0, 1, "127.0.0.1", 7)[0] == [("127.0.0.1", 7)]
    service.close(ticket)


def test_a_task_of_another_protocol_version_is_told_so(service, monkeypatch):
    ticket = service.open(b"s" * 32, wait=5)
    monkeypatch.setattr(rendezvous, "MAGIC", b"TSRDV00" + MAGIC[-1:])     # as a task of an older package sends
    with pytest.raises(RendezvousError, match=f"rendezvous at 127.0.0.1:{ticket.port} speaks another version of "
                                              f"the rendezvous protocol \\(b'{rendezvous.PREFIX.decode()}'; this "
                                              f"task sends b'TSRDV00"):
        meet(ticket, 1, 0, 0, 1, "127.0.0.1", 1)
    monkeypatch.undo()
    assert meet(ticket, 1, 0, 0, 1, "127.0.0.1", 7)[0] == [("127.0.0.1", 7)]
    service.close(ticket)


def test_a_task_of_the_version_before_driver_error_answers_is_told_on_both_sides(caplog, monkeypatch):
    # version 03 tasks took a {"driver_error": ...} answer to a report for success: they
    # must not reach a driver that sends one, and the driver says so in its log
    assert rendezvous.PREFIX != b"TSRDV03"
    service = DriverRendezvous("127.0.0.1")
    ticket = service.open(b"s" * 32, wait=5)
    monkeypatch.setattr(rendezvous, "MAGIC", b"TSRDV03" + MAGIC[-1:])     # as a task of the older package sends
    with caplog.at_level("WARNING", logger="timely_spark.spark.rendezvous"):
        for _ in range(2):
            with pytest.raises(RendezvousError, match="speaks another version of the rendezvous protocol "
                                                      f"\\(b'{rendezvous.PREFIX.decode()}'; this task sends "
                                                      "b'TSRDV03.*must run the same timely_spark version"):
                meet(ticket, 1, 0, 0, 1, "127.0.0.1", 1)
    warned = [r.getMessage() for r in caplog.records
              if r.levelname == "WARNING" and "greeted with b'TSRDV03'" in r.getMessage()]
    assert len(warned) == 1 and "another timely_spark version" in warned[0]       # once per greeting
    monkeypatch.undo()
    assert meet(ticket, 1, 0, 0, 1, "127.0.0.1", 7)[0] == [("127.0.0.1", 7)]
    service.close(ticket)


def test_greetings_that_are_not_the_protocols_use_up_none_of_the_warnings(service, caplog, monkeypatch):
    # a port scan's greetings are logged at debug level: the warnings are kept for tasks of another version
    ticket = service.open(b"s" * 32, wait=5)
    hello = len(MAGIC) + 16 + 32
    with caplog.at_level("DEBUG", logger="timely_spark.spark.rendezvous"):
        for i in range(rendezvous.OTHER_VERSIONS_LOGGED + 1):
            with socket.create_connection((ticket.host, ticket.port), timeout=5) as junk:
                junk.sendall(f"{i:02d}GET / HTTP/1.1\r\n".encode().ljust(hello, b"x"))
                assert recv_exact(junk, 1, time.monotonic() + 5) == b"!"
        monkeypatch.setattr(rendezvous, "MAGIC", b"TSRDV03" + MAGIC[-1:])
        with pytest.raises(RendezvousError, match="speaks another version"):
            meet(ticket, 1, 0, 0, 1, "127.0.0.1", 1)
        deadline = time.monotonic() + 10             # the driver warns just after it answers
        while time.monotonic() < deadline and not any("greeted with b'TSRDV03'" in r.getMessage()
                                                          for r in caplog.records):
            time.sleep(0.02)
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "greeted" in r.getMessage()]
    assert len(warned) == 1 and "b'TSRDV03'" in warned[0]
    assert sum("not a rendezvous greeting" in r.getMessage() for r in caplog.records) > 0
    monkeypatch.undo()
    service.close(ticket)


def test_a_reported_error_a_re_run_would_repeat_cancels_only_a_stage_the_job_met_in(service):
    cancelled = []
    ticket = service.open(b"c" * 32, wait=5, cancel_stage=lambda stage, reason: cancelled.append((stage, reason)))
    error = ts.WorkerError(1, ZeroDivisionError("division by zero"), "Map", "the traceback")
    report_failure(ticket, 9, 3, error)                   # stage 9: no task of this job met in it
    assert cancelled == []
    assert meet(ticket, 4, 3, 0, 1, "127.0.0.1", 7)[0] == [("127.0.0.1", 7)]
    report_failure(ticket, 4, 3, ts.WorkerFailure("process 1 closed the connection"))    # left to Spark's re-run
    assert cancelled == []
    report_failure(ticket, 4, 3, error)       # answered after the cancel: the task raises only then
    assert cancelled == [(4, f"{failure_marker(ticket, 4, 3)} failed: WorkerError (Spark does not re-run the "
                             "stage: it would fail the same way)")]
    service.close(ticket)


def test_the_reports_of_a_timeout_are_answered_only_after_the_last_worker_s_ended_the_stage(service):
    # a task ends when its report is answered; a task that ended before the cancel would fail
    # the stage attempt, and Spark would start the next one: so the first report waits
    order = []
    ticket = service.open(b"t" * 32, wait=10, cancel_stage=lambda stage, reason: order.append(("cancel", stage)))
    met = [threading.Thread(target=meet, args=(ticket, 6, 10 + i, i, 2, "127.0.0.1", 7 + i)) for i in (0, 1)]
    for t in met:
        t.start()
    for t in met:
        t.join(15)

    def report(index):
        report_failure(ticket, 6, 10 + index, ts.RunTimeout(5, {index: "Dataflow0 at (3,)"}))
        order.append(("answered", index))

    first = threading.Thread(target=report, args=(0,))
    first.start()
    time.sleep(0.5)            # worker 1 reports later (order only: either way the first waits)
    report(1)
    first.join(15)
    assert order[0] == ("cancel", 6) and sorted(order[1:]) == [("answered", 0), ("answered", 1)]
    assert order.count(("cancel", 6)) == 1
    service.close(ticket)


def test_a_task_meeting_a_driver_of_another_version_is_told_so():
    # the driver of another version, written from the protocol: it answers "!" and its own prefix
    with socket.create_server(("127.0.0.1", 0)) as listener:
        def old_driver():
            sock, _ = listener.accept()
            with sock:
                recv_exact(sock, len(MAGIC) + 16 + 32, time.monotonic() + 10)
                sock.sendall(b"!TSRDV03")

        thread = threading.Thread(target=old_driver)
        thread.start()
        ticket = Ticket("127.0.0.1", listener.getsockname()[1], b"t" * 16, b"s" * 32, 5)
        with pytest.raises(RendezvousError, match="speaks another version of the rendezvous protocol "
                                                  f"\\(b'TSRDV03'; this task sends b'{rendezvous.PREFIX.decode()}"):
            meet(ticket, 1, 0, 0, 1, "127.0.0.1", 1)
        thread.join(10)
        assert not thread.is_alive()


@pytest.mark.parametrize("stage, host, port, wrong", [
    (1, "127.0.0.1", "a port", "a 'meet' request whose 'port' is a JSON string ('a port'), not an integer"),
    (1, 7, 5000, "a 'meet' request whose 'host' is a JSON number (7), not a string"),
    (True, "127.0.0.1", 5000, "a 'meet' request whose 'stage' is a JSON boolean (True), not an integer"),
])
def test_a_malformed_request_is_answered_and_the_task_raises_naming_what_is_wrong(service, caplog, stage, host,
                                                                                   port, wrong):
    # the task's own side (meet) sends what its arguments make, under the job's secret
    ticket = service.open(b"s" * 32, wait=5)
    with caplog.at_level("WARNING", logger="timely_spark.spark.rendezvous"):
        with pytest.raises(RendezvousError) as refused:
            meet(ticket, stage, 0, 0, 1, host, port)
    message = str(refused.value)
    assert f"the driver's rendezvous at 127.0.0.1:{ticket.port} refused this task's request as malformed: " \
           f"{wrong}" in message
    assert "did not answer" not in message and "secret" not in message
    assert any(r.levelname == "WARNING" and f"sent a malformed request: {wrong}" in r.getMessage()
               for r in caplog.records)
    assert meet(ticket, 1, 0, 0, 1, "127.0.0.1", 7)[0] == [("127.0.0.1", 7)]     # the service goes on
    service.close(ticket)


@pytest.mark.parametrize("request_, wrong", [
    ([1, 2], "a JSON array, not an object"),
    ("meet", "a JSON string, not an object"),
    ({"stage": 1}, "its 'kind' is None, not one of ['failed', 'meet', 'stats']"),
    ({"kind": "hello"}, "its 'kind' is 'hello', not one of ['failed', 'meet', 'stats']"),
    ({"kind": ["meet"]}, "its 'kind' is ['meet'], not one of ['failed', 'meet', 'stats']"),
    ({"kind": "meet", "stage": 1, "task": 0}, "a 'meet' request without 'index'"),
    ({"kind": "failed", "stage": 1, "task": 0}, "a 'failed' request without 'error'"),
    ({"kind": "stats", "report": [1]}, "a 'stats' request whose 'report' is a JSON array ([1]), not an object"),
])
def test_an_authenticated_request_off_the_protocol_gets_an_authenticated_answer_naming_it(service, request_, wrong):
    # written from the protocol here (an attacker or another version that knows the job's secret)
    ticket = service.open(b"k" * 32, wait=5)
    answer = authenticated_request(ticket, request_)
    assert json.loads(answer) == {"malformed": wrong}          # opened under the job's secret: the driver's
    assert meet(ticket, 1, 0, 0, 1, "127.0.0.1", 7)[0] == [("127.0.0.1", 7)]
    service.close(ticket)


@pytest.mark.parametrize("body, wrong", [
    (b'{"kind": "meet", "host": "h\xff"}', "30 bytes that are not UTF-8 text (byte 27: b'\\xff', invalid start byte)"),
    (b"\xc3", "1 bytes that are not UTF-8 text (byte 0: b'\\xc3', unexpected end of data)"),
    (b'{"kind": "meet",', "16 bytes of text that are not JSON (Expecting property name enclosed in double quotes: "
                         "line 1 column 17 (char 16))"),
    (b"", "0 bytes of text that are not JSON (Expecting value: line 1 column 1 (char 0))"),
    (b"[" * 5000 + b"]" * 5000, "10000 bytes of JSON nested deeper than this Python parses"),   # not a RecursionError
])
def test_an_authenticated_request_that_is_not_utf8_json_gets_an_authenticated_answer_naming_it(service, caplog,
                                                                                                body, wrong):
    ticket = service.open(b"k" * 32, wait=5)
    with caplog.at_level("WARNING", logger="timely_spark.spark.rendezvous"):
        answer = authenticated_request(ticket, body)
    assert json.loads(answer) == {"malformed": wrong}          # opened under the job's secret: the driver's
    assert any(r.levelname == "WARNING" and f"sent a malformed request: {wrong}" in r.getMessage()
               for r in caplog.records)
    assert meet(ticket, 1, 0, 0, 1, "127.0.0.1", 7)[0] == [("127.0.0.1", 7)]
    service.close(ticket)


def test_a_request_that_is_not_json_under_another_secret_gets_no_answer(service, caplog):
    # the same bytes sealed without the job's secret: closed, nothing told
    ticket = service.open(b"k" * 32, wait=5)
    with caplog.at_level("DEBUG", logger="timely_spark.spark.rendezvous"):
        assert authenticated_request(Ticket(ticket.host, ticket.port, ticket.token, b"x" * 32), b"\xff") == b""
    assert not any("malformed" in r.getMessage() for r in caplog.records)
    service.close(ticket)


SECRET = bytes(range(32))         # a job secret with a hex, a repr and a base64 form to hide


class HookExit(BaseException):
    """A BaseException of a job's own, neither SystemExit nor KeyboardInterrupt."""


@pytest.mark.parametrize("raised", [SystemExit(f"leaving, key {SECRET.hex()}"), KeyboardInterrupt(),
                                    HookExit(f"stop {SECRET!r}"), GeneratorExit()])
def test_a_hook_raising_a_base_exception_is_answered_and_the_service_goes_on(caplog, raised):
    # a serving thread answers any BaseException: nothing above it would act on a
    # SystemExit or KeyboardInterrupt (threading drops the one; Ctrl-C goes to the main thread)
    service = DriverRendezvous("127.0.0.1")
    calls = []

    def on_stats(report):
        calls.append(report)
        raise raised

    ticket = service.open(SECRET, wait=30, on_stats=on_stats)
    with caplog.at_level("WARNING", logger="timely_spark.spark.rendezvous"):
        report_stats(ticket, {"n": 3})
    logged = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    told = [m for m in logged if m.startswith("timely_spark: could not send a task's timings")]
    name = type(raised).__qualname__
    assert len(told) == 1 and "did not answer" not in told[0], logged
    assert (f"failed while answering this task's 'stats' request: {name}" in told[0]), told[0]
    assert calls == [{"n": 3}]            # told at once: no second connection
    assert any("'stats' request failed" in m and "Traceback" in m and name in m for m in logged)
    for shown in logged:
        assert SECRET.hex() not in shown and repr(SECRET)[2:-1] not in shown
    assert meet(ticket, 1, 0, 0, 1, "127.0.0.1", 7)[0] == [("127.0.0.1", 7)]     # the service goes on
    service.close(ticket)


def test_a_request_the_driver_fails_to_answer_is_told_so_at_once_naming_the_error(caplog):
    import base64

    service = DriverRendezvous("127.0.0.1")
    calls = []

    def on_stats(report):                 # the job's hook for timing reports raises, showing the secret
        calls.append(report)
        raise ZeroDivisionError(f"cannot average {report['n']} tasks; key {SECRET.hex()} {SECRET!r} "
                                f"{base64.b64encode(SECRET).decode()}")

    ticket = service.open(SECRET, wait=30, on_stats=on_stats)
    with caplog.at_level("WARNING", logger="timely_spark.spark.rendezvous"):
        report_stats(ticket, {"n": 3})    # the task's side: best effort, its RendezvousError logged
    logged = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    told = [m for m in logged if m.startswith("timely_spark: could not send a task's timings")]
    assert len(told) == 1 and "did not answer" not in told[0]
    assert (f"(the driver's rendezvous at 127.0.0.1:{ticket.port} failed while answering this task's 'stats' "
            f"request: ZeroDivisionError: cannot average 3 tasks; key <secret>") in told[0]
    assert calls == [{"n": 3}]            # told at once: the task did not connect again (nor the hook run twice)
    assert any("answering" in m and "'stats' request failed" in m and "Traceback" in m and "in on_stats" in m
               and "ZeroDivisionError: cannot average 3 tasks" in m for m in logged)
    for shown in logged:      # in no form, neither to the task nor in the driver's log
        for form in (SECRET.hex(), repr(SECRET)[2:-1], base64.b64encode(SECRET).decode()):
            assert form not in shown
    service.attempt_of = lambda stage, task: {}[stage]        # the scheduler's answer itself raises
    with pytest.raises(RendezvousError, match=f"rendezvous at 127.0.0.1:{ticket.port} failed while answering "
                                              f"this task's 'meet' request: KeyError: 1 \\(the driver's log"):
        meet(ticket, 1, 0, 0, 1, "127.0.0.1", 7)
    service.attempt_of = lambda stage, task: None
    assert meet(ticket, 1, 0, 0, 1, "127.0.0.1", 7)[0] == [("127.0.0.1", 7)]     # the service goes on
    service.close(ticket)


class BadRecord(Exception):
    """A user's own exception type: the driver does not rebuild it, only names it."""


def test_a_reported_failure_is_what_the_driver_raises_for_sparks_error_naming_its_job(service):
    ticket = service.open(b"s" * 32)
    failure = ts.WorkerError(3, BadRecord("line 7 has 3 fields"), "Parse", "Traceback ... parse(line)")
    report_failure(ticket, 12, 40, failure)
    unrelated = RuntimeError(f"Job aborted ... {failure} ... at org.apache.spark")   # the same text, no marker
    assert timely_cause(unrelated) is None
    spark_error = RuntimeError(f"Job aborted ... ReportedError: {failure_marker(ticket, 12, 40)}: ... at org.apache")
    found = timely_cause(spark_error)
    assert isinstance(found, ts.WorkerError) and found.worker == 3 and found.operator == "Parse"
    assert str(found).startswith("worker 3, operator 'Parse' failed: BadRecord: line 7 has 3 fields")
    assert "parse(line)" in found.remote_traceback
    assert timely_cause(spark_error) is None              # claimed once
    service.close(ticket)


class WritesAFile:
    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (exec, (f"open({self.path!r}, 'w').write('unpickled on the driver')",))


def test_a_report_carrying_a_pickle_is_never_unpickled(service, tmp_path):
    import base64
    import pickle

    marker = tmp_path / "side-effect"
    payload = base64.b64encode(pickle.dumps(WritesAFile(marker))).decode()
    ticket = service.open(b"k" * 32)            # the attacker knows the job's secret
    for error in (payload, {"type": "WorkerError", "module": "timely_spark.errors", "message": payload,
                            "args": [payload], "cause": payload, "worker": 0, "traceback": payload}):
        answer = authenticated_request(ticket, {"kind": "failed", "stage": 5, "task": 9, "error": error})
        assert b'"ok": true' in answer          # taken as data
    found = timely_cause(RuntimeError(failure_marker(ticket, 5, 9)))
    assert not marker.exists()
    assert isinstance(found, ts.TimelyError) and payload in str(found)     # shown as text, never run
    service.close(ticket)


def test_a_request_longer_than_a_registration_is_refused_before_it_is_read(service):
    from timely_spark.spark.rendezvous import RENDEZVOUS_MAX_REQUEST

    ticket = service.open(b"k" * 32)
    assert authenticated_request(ticket, {"kind": "meet"}, length=16 * 1024 * 1024) == b""   # closed: no answer
    with pytest.raises(OSError):        # the driver stopped reading after the length: sending the rest fails
        with socket.create_connection((ticket.host, ticket.port), timeout=10) as sock:
            sock.sendall(MAGIC + ticket.token + os.urandom(32))
            recv_exact(sock, 65, time.monotonic() + 10)
            sock.sendall(struct.pack("<I", 1 << 24))
            for _ in range(1 << 24 >> 16):
                sock.sendall(b"x" * (1 << 16))
    report = ts.WorkerError(0, ValueError("é" * 100_000), "Map", "Traceback\n" + "  frame\n" * 100_000)
    report_failure(ticket, 1, 2, report)     # a huge error is cut to fit, and still arrives
    found = timely_cause(RuntimeError(failure_marker(ticket, 1, 2)))
    assert isinstance(found, ts.WorkerError) and str(found).startswith("worker 0, operator 'Map' failed: ValueError: é")
    assert len(json.dumps(ts.errors.describe_error(report)).encode()) > RENDEZVOUS_MAX_REQUEST
    assert meet(ticket, 1, 0, 0, 1, "127.0.0.1", 7)[0] == [("127.0.0.1", 7)]
    service.close(ticket)


def test_a_ticket_opened_with_an_idle_bound_closes_when_unused(service):
    ticket = service.open(b"s" * 32, wait=5, idle=0.5)
    assert meet(ticket, 1, 0, 0, 1, "127.0.0.1", 7)[0] == [("127.0.0.1", 7)]      # in use
    time.sleep(1.0)
    with pytest.raises(RendezvousError, match="does not know this job.*transform result unused"):
        meet(ticket, 2, 0, 0, 1, "127.0.0.1", 7)


def test_a_retried_stage_meets_only_its_own_attempt():
    service = DriverRendezvous("127.0.0.1")              # Spark's scheduler replaced: attempt a runs tasks 100a + i
    service.attempt_of = lambda stage, task: task // 100
    ticket = service.open(b"s" * 32, wait=20)
    old = start_meeting(ticket, 3, only=[0, 2])          # attempt 0: task 1 died before registering
    time.sleep(1.0)
    late = start_meeting(ticket, 3, only=[1], first_task=100, port=6000)     # the retry's task 1 comes first
    time.sleep(1.0)
    results, errors = meet_all(ticket, 3, only=[0, 2], first_task=100, port=6000)
    for t in old[0] + late[0]:
        t.join(30)
    results.update(late[1])
    assert not errors and not late[2]
    assert results == {i: [("127.0.0.1", 6000 + j) for j in range(3)] for i in range(3)}
    assert sorted(old[2]) == [0, 2] and all("attempt 0 was superseded by attempt 1" in str(e) for e in old[2].values())
    with pytest.raises(ts.WorkerFailure, match="attempt 0 was superseded by attempt 1"):
        meet(ticket, 1, 1, 1, 3, "127.0.0.1", 5001)      # a late task of the failed attempt meets no one
    service.close(ticket)


def test_tasks_spark_could_not_place_meet_with_those_it_could():
    service = DriverRendezvous("127.0.0.1")              # the scheduler places only task 1 (attempt 0)
    service.attempt_of = lambda stage, task: 0 if task == 1 else None
    ticket = service.open(b"s" * 32, wait=20)
    results, errors = meet_all(ticket, 3)
    assert not errors, errors
    assert results == {i: [("127.0.0.1", 5000 + j) for j in range(3)] for i in range(3)}
    service.close(ticket)


def test_a_task_whose_answer_was_lost_gets_it_again():
    service = DriverRendezvous("127.0.0.1")
    ticket = service.open(b"s" * 32, wait=5)
    first, errors = meet_all(ticket, 2)
    assert not errors
    # task 1's answer never reached it: it registers again, as meet() does after a lost connection
    again = meet(ticket, 1, 1, 1, 2, "127.0.0.1", 5001)[0]
    assert again == first[1] == [("127.0.0.1", 5000), ("127.0.0.1", 5001)]
    service.close(ticket)


class IdleConnections:
    """A loopback client holding ``count`` connections to the rendezvous that never say
    a word, opening a new one whenever the driver drops one."""

    def __init__(self, address, count):
        self.address, self.count = address, count
        self.socks, self.opened = [], 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._hold, daemon=True)

    def _hold(self):
        import selectors

        with selectors.DefaultSelector() as held:      # not select(): descriptors here may pass 1024
            while not self.stop.is_set():
                while len(self.socks) < self.count:
                    sock = socket.create_connection(self.address, timeout=10)
                    self.socks.append(sock)
                    held.register(sock, selectors.EVENT_READ)
                    self.opened += 1
                for key, _ in held.select(0.05):        # dropped by the driver: hold another one
                    held.unregister(key.fileobj)
                    key.fileobj.close()
                    self.socks.remove(key.fileobj)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 30
        while self.opened < self.count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)
        for sock in self.socks:
            sock.close()


def test_idle_connections_do_not_shut_a_real_job_out(spark):
    service = rendezvous.session_rendezvous(spark.sparkContext)
    with IdleConnections((service.host, service.port), 300):
        assert ts.spark.run(spark, lambda w: w.index * 10, workers=2, timeout=60) == [0, 10]
        ticket = service.open(b"s" * 32, wait=30)
        results, errors = meet_all(ticket, 64)
        assert not errors and len(results) == 64
        service.close(ticket)


def test_more_idle_connections_than_the_driver_takes_at_once_do_not_shut_tasks_out():
    from timely_spark.spark.rendezvous import RENDEZVOUS_PENDING

    service = DriverRendezvous("127.0.0.1")
    ticket = service.open(b"s" * 32, wait=30)
    with IdleConnections((service.host, service.port), RENDEZVOUS_PENDING + 100) as idle:
        results, errors = meet_all(ticket, 32)
        assert idle.opened > RENDEZVOUS_PENDING + 100      # the driver dropped idle ones to let tasks in
    assert not errors and results == {i: [("127.0.0.1", 5000 + j) for j in range(32)] for i in range(32)}


def test_256_tasks_registering_at_once_meet_though_each_is_slow_to_answer(service, monkeypatch):
    keys = rendezvous.message_keys

    def slow(*args):                      # every request (tasks sending, the driver checking) takes 50 ms
        time.sleep(0.05)
        return keys(*args)

    monkeypatch.setattr(rendezvous, "message_keys", slow)
    ticket = service.open(b"s" * 32, wait=60)
    results, errors = meet_all(ticket, 256)
    assert not errors, next(iter(errors.values()))
    assert results == {i: [("127.0.0.1", 5000 + j) for j in range(256)] for i in range(256)}
    service.close(ticket)


def test_run_meets_through_the_driver_and_falls_back_to_allgather(spark):
    stats = {}
    assert ts.spark.run(spark, lambda w: w.index * 10, workers=2, stats=stats) == [0, 10]
    assert [t["met_through"] for t in stats["tasks"]] == ["driver", "driver"]
    assert [t["stage_attempt"] for t in stats["tasks"]] == [0, 0]     # Spark's scheduler told the driver
    spark.conf.set(RENDEZVOUS_CONF, "allGather")
    try:
        assert ts.spark.run(spark, lambda w: w.index * 10, workers=2, stats=stats) == [0, 10]
        assert [t["met_through"] for t in stats["tasks"]] == ["allGather", "allGather"]
        rows = ts.spark.transform(spark.range(6).repartition(2), lambda scope, s: s, "id long").collect()
        assert sorted(r["id"] for r in rows) == list(range(6))
    finally:
        spark.conf.unset(RENDEZVOUS_CONF)


def arrive(folder):
    """Run in a task as it unpickles its build, before it registers: partition 1's first
    start waits for partition 0's, then kills its Python worker; partition 0's second
    start (the retry) waits, so that the retry's partition 1 registers first."""
    from pathlib import Path

    from pyspark import TaskContext

    partition = TaskContext.get().partitionId()
    starts = Path(folder) / f"p{partition}"
    with open(starts, "a") as f:
        f.write("x")
    if partition == 1 and len(starts.read_text()) == 1:
        deadline = time.monotonic() + 30
        while not (Path(folder) / "p0").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)                     # partition 0 registers meanwhile
        os._exit(1)
    if partition == 0 and len(starts.read_text()) == 2:
        time.sleep(2.0)
    return keep


def keep(scope, batches):
    return batches


class DiesBeforeRegistering:
    def __init__(self, folder):
        self.folder = str(folder)

    def __reduce__(self):
        return (arrive, (self.folder,))


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_stage_retried_after_a_task_died_before_registering_meets_its_own_tasks(spark, tmp_path):
    df = spark.createDataFrame([(i % 3,) for i in range(30)], "x long").repartition(2)
    counted = ts.spark.transform(df, DiesBeforeRegistering(tmp_path), "x long").groupBy("x").count()
    assert sorted(tuple(r) for r in counted.collect()) == [(0, 10), (1, 10), (2, 10)]   # a barrier map stage
    assert (tmp_path / "p1").read_text() == "xx"          # ... that Spark ran again after partition 1 died


def test_over_connect_the_client_serves_the_rendezvous_only_on_the_servers_machine(connect_spark):
    """A Connect client dialling a loopback server, whose Spark driver's host is a loopback
    address, serves the rendezvous (tasks meet through it); the same loopback driver host
    seen by a client dialling another machine is that machine's: no rendezvous in the
    client, the tasks meet through allGather."""
    from timely_spark.spark.connect import client_on_driver_host, conf_get, connect_session, endpoint_host
    from timely_spark.spark.rendezvous import session_rendezvous

    session = connect_session(connect_spark)
    host = conf_get(session, "spark.driver.host")
    assert endpoint_host(session) == "127.0.0.1" and client_on_driver_host(host, "127.0.0.1")
    assert session_rendezvous(session) is not None
    assert not client_on_driver_host(host, "203.0.113.7")           # a documentation address: another machine
