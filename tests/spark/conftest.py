"""One SparkSession (local[2], driver on 127.0.0.1, UI off) for the whole test session."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark():
    import timely_spark as ts

    session = ts.spark.get_session("timely_spark tests", master="local[2]", conf_dir=ROOT / "conf")
    yield session
    session.stop()
