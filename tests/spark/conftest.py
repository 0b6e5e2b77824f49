"""One SparkSession (local[2], driver on 127.0.0.1, UI off) for the whole test session,
which also serves Spark Connect (its plugin, on a free loopback port): ``any_spark``
gives a test the classic session and then a Connect session of the same application,
so one test body checks both.

A test of the session that runs past its timeout is not interrupted in its own thread:
pytest-timeout's signal lands inside a py4j call and leaves the JVM's answer to it
unread on the thread's gateway connection, so every later call of the session reads
the answer meant for the call before (``KeyError: 'c'``, ``PythonUtils does not exist
in the JVM``) and every Spark test after it fails.  Instead, another thread stops the
session's streaming queries and cancels its jobs (again each second) until the test
returns, and the test is reported failed by its timeout; one that has not returned
a minute later ends the run as pytest-timeout's thread method does (stacks dumped).
The session's start (the JVM's, in the setup of the first Spark test of a run) is
not charged to that test: it has a budget of its own, after which the test gets its
whole timeout."""

import os
import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import pytest_timeout

ROOT = Path(__file__).resolve().parents[2]
TIMED_OUT = pytest.StashKey[float]()
GRACE = 60.0          # seconds a timed-out test has to return once its Spark work is cancelled
SESSION_START = 300.0     # seconds the session may take to start (a loaded machine, another Spark application)

CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"      # what PySpark's functions dispatch on (classic or Connect)
JVM_NAMES = {"_jvm", "_jsc", "_jdf", "_jsparkSession", "_sc", "sparkContext", "rdd"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def connect_port():
    return _free_port()


@pytest.fixture(scope="session")
def spark(connect_port):
    import timely_spark as ts

    session = ts.spark.get_session("timely_spark tests", master="local[2]", conf_dir=ROOT / "conf", extra={
        "spark.plugins": CONNECT_PLUGIN, "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(connect_port)})
    yield session
    session.stop()


@contextmanager
def _connect_mode(on: bool):
    before = os.environ.pop(CONNECT_MODE, None)
    if on:
        os.environ[CONNECT_MODE] = "1"
    try:
        yield
    finally:
        os.environ.pop(CONNECT_MODE, None)
        if before is not None:
            os.environ[CONNECT_MODE] = before


@pytest.fixture(scope="session")
def connect_spark(spark, connect_port):
    """A Spark Connect session of the test session's server (loopback)."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    with _connect_mode(True):
        session = ConnectSession.builder.remote(f"sc://127.0.0.1:{connect_port}").getOrCreate()
    yield session
    with _connect_mode(True):
        session.stop()


class _Tripwire:
    def __init__(self, touched: list, name: str) -> None:
        self._touched, self._name = touched, name

    def __getattr__(self, attr: str):
        self._touched.append(f"{self._name}.{attr}")
        raise AssertionError(f"a Spark Connect code path reached {self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        self._touched.append(self._name)
        raise AssertionError(f"a Spark Connect code path called {self._name}")


@contextmanager
def _no_jvm(monkeypatch):
    """Fail the test if anything reaches the JVM gateway, a SparkContext or a Connect
    object's JVM-only attributes while it runs."""
    from pyspark import SparkContext
    from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    touched: list = []
    for name in ("_jvm", "_gateway", "_active_spark_context"):
        monkeypatch.setattr(SparkContext, name, _Tripwire(touched, f"SparkContext.{name}"))
    frame_getattr = ConnectFrame.__getattr__

    def watched_frame(self, name):
        if name in JVM_NAMES:
            touched.append(f"DataFrame.{name}")
        return frame_getattr(self, name)

    def watched_session(self, name):
        if name in JVM_NAMES:
            touched.append(f"SparkSession.{name}")
        raise AttributeError(name)

    monkeypatch.setattr(ConnectFrame, "__getattr__", watched_frame)
    monkeypatch.setattr(ConnectSession, "__getattr__", watched_session, raising=False)
    yield touched
    assert not touched, f"a Spark Connect code path reached the JVM: {sorted(set(touched))}"


@pytest.fixture(params=["classic", "connect"])
def any_spark(request, spark, monkeypatch):
    """The classic session, then a Spark Connect session (with nothing reaching the JVM)."""
    if request.param == "classic":
        with _connect_mode(False):
            yield spark
        return
    session = request.getfixturevalue("connect_spark")
    with _connect_mode(True), _no_jvm(monkeypatch):
        yield session


def _session(item):
    """The test's ``spark`` session once its fixtures are set up, else None."""
    return getattr(item, "funcargs", {}).get("spark")


def _cancel_spark_work(session):
    """Stop every active streaming query and cancel every job of ``session``."""
    try:
        for query in session.streams.active:
            query.stop()
        session.sparkContext.cancelAllJobs()
    except Exception:           # the session may be stopping: nothing left to cancel
        pass


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_set_timer(item, settings):
    """The timer of a test using the ``spark`` session (others keep pytest-timeout's)."""
    if "spark" not in getattr(item, "fixturenames", ()):
        return None
    returned = threading.Event()

    def expire():
        starting = False
        waited = time.monotonic()
        while _session(item) is None and time.monotonic() - waited < SESSION_START:
            starting = True                 # the session is still starting: not this test's time
            if returned.wait(1.0):
                return
        if starting and returned.wait(settings.timeout):
            return
        item.stash[TIMED_OUT] = settings.timeout
        for _ in range(int(GRACE)):
            session = _session(item)
            if session is not None:
                _cancel_spark_work(session)
            if returned.wait(1.0):
                return
        pytest_timeout.timeout_timer(item, settings)

    timer = threading.Timer(settings.timeout, expire)
    timer.daemon = True

    def cancel():
        returned.set()
        timer.cancel()
        timer.join()

    item.cancel_timeout = cancel            # what pytest-timeout's own cancel hook calls
    timer.start()
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call" and TIMED_OUT in item.stash:
        report.outcome = "failed"
        report.longrepr = (f"Timeout (>{item.stash[TIMED_OUT]}s): the test's streaming queries were stopped and "
                           f"its Spark jobs cancelled\n{report.longrepr or ''}")
    return report
