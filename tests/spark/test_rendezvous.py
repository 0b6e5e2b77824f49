"""The driver's rendezvous: real sockets, the tasks' side called from threads; and
ts.spark.run meeting through it or, when told, through allGather."""

import socket
import threading

import pytest

import timely_spark as ts
from timely_spark.spark.job_errors import timely_cause
from timely_spark.spark.rendezvous import (
    RENDEZVOUS_CONF,
    RendezvousError,
    Ticket,
    driver_rendezvous,
    meet,
    report_failure,
)


@pytest.fixture(scope="module")
def service():
    return driver_rendezvous("127.0.0.1")     # the driver process's own (as the Spark jobs use)


def meet_all(ticket, workers, stage=1, only=None):
    results, errors = {}, {}

    def task(i):
        try:
            results[i] = meet(ticket, stage, i, workers, "127.0.0.1", 5000 + i)
        except Exception as exc:
            errors[i] = exc

    threads = [threading.Thread(target=task, args=(i,)) for i in (only if only is not None else range(workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results, errors


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
        meet(forged, 1, 0, 1, "127.0.0.1", 1)
    unknown = Ticket(ticket.host, ticket.port, b"x" * 16, ticket.secret, ticket.wait)
    with pytest.raises(RendezvousError, match="closed the connection without an answer"):
        meet(unknown, 1, 0, 1, "127.0.0.1", 1)
    with socket.create_connection((ticket.host, ticket.port)) as junk:   # garbage, then a hang-up
        junk.sendall(b"GET / HTTP/1.0\r\n\r\n")
    assert meet(ticket, 1, 0, 1, "127.0.0.1", 7) == [("127.0.0.1", 7)]
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
        meet(ticket, 1, 0, 1, "127.0.0.1", 1)


def test_a_reported_failure_is_what_the_driver_raises_for_sparks_error(service):
    ticket = service.open(b"s" * 32)
    failure = ts.WorkerError(3, ZeroDivisionError("division by zero"), "Divide", "Traceback ...")
    report_failure(ticket, failure)
    spark_error = RuntimeError(f"Job aborted due to stage failure ... {failure} ... at org.apache.spark")
    found = timely_cause(spark_error)
    assert isinstance(found, ts.WorkerError) and found.worker == 3 and found.operator == "Divide"
    assert timely_cause(spark_error) is None              # claimed once
    assert timely_cause(RuntimeError("something else")) is None
    service.close(ticket)


def test_run_meets_through_the_driver_and_falls_back_to_allgather(spark):
    stats = {}
    assert ts.spark.run(spark, lambda w: w.index * 10, workers=2, stats=stats) == [0, 10]
    assert [t["met_through"] for t in stats["tasks"]] == ["driver", "driver"]
    spark.conf.set(RENDEZVOUS_CONF, "allGather")
    try:
        assert ts.spark.run(spark, lambda w: w.index * 10, workers=2, stats=stats) == [0, 10]
        assert [t["met_through"] for t in stats["tasks"]] == ["allGather", "allGather"]
        rows = ts.spark.transform(spark.range(6).repartition(2), lambda scope, s: s, "id long").collect()
        assert sorted(r["id"] for r in rows) == list(range(6))
    finally:
        spark.conf.unset(RENDEZVOUS_CONF)
