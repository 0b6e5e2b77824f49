"""One SparkSession (local[2], driver on 127.0.0.1, UI off) for the whole test session.

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

import threading
import time
from pathlib import Path

import pytest
import pytest_timeout

ROOT = Path(__file__).resolve().parents[2]
TIMED_OUT = pytest.StashKey[float]()
GRACE = 60.0          # seconds a timed-out test has to return once its Spark work is cancelled
SESSION_START = 300.0     # seconds the session may take to start (a loaded machine, another Spark application)


@pytest.fixture(scope="session")
def spark():
    import timely_spark as ts

    session = ts.spark.get_session("timely_spark tests", master="local[2]", conf_dir=ROOT / "conf")
    yield session
    session.stop()


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
