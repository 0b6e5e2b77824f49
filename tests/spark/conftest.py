"""One SparkSession (local[2], driver on 127.0.0.1, UI off) for the whole test session,
which also serves Spark Connect (its plugin, on a free loopback port): ``any_spark``
gives a test the classic session and then a Connect session of the same application,
so one test body checks both."""

import os
import socket
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

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
