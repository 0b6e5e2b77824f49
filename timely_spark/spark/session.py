"""A SparkSession for jobs and tests, from ``conf/spark-defaults.conf``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Optional

__all__ = ["read_conf", "get_session"]


def read_conf(path: Any) -> dict[str, str]:
    """The ``key value`` pairs of a spark-defaults.conf file (comments and blanks skipped)."""
    conf: dict[str, str] = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        conf[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
    return conf


def get_session(app_name: str, master: Optional[str] = None, conf_dir: Optional[Any] = None,
                extra: Optional[dict[str, str]] = None) -> Any:
    """The active SparkSession, or a new one.

    Settings come from ``conf_dir/spark-defaults.conf`` (default ``$SPARK_CONF_DIR``)
    and ``extra``, but never override what ``spark-submit`` was given; ``master``, if
    passed, wins.  ``conf_dir/log4j2.properties`` configures logging when this call
    starts the JVM.  Executors run this Python (``PYSPARK_PYTHON``), so they import
    the same timely_spark.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    conf_dir = conf_dir or os.environ.get("SPARK_CONF_DIR")
    settings: dict[str, str] = {}
    if conf_dir and (Path(conf_dir) / "spark-defaults.conf").exists():
        settings.update(read_conf(Path(conf_dir) / "spark-defaults.conf"))
        log4j = Path(conf_dir) / "log4j2.properties"
        jvm_started = SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ
        if log4j.exists() and not jvm_started and "PYSPARK_SUBMIT_ARGS" not in os.environ:
            os.environ["PYSPARK_SUBMIT_ARGS"] = (
                f"--driver-java-options -Dlog4j2.configurationFile=file:{log4j.resolve()} pyspark-shell")
    settings.update(extra or {})
    submitted = SparkConf()   # what spark-submit (or an earlier session) already set
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        if not submitted.contains(key):
            builder = builder.config(key, value)
    if master:
        builder = builder.master(master)
    elif not submitted.contains("spark.master") and "spark.master" not in settings:
        builder = builder.master("local[2]")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
