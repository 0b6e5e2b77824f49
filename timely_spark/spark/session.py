"""A SparkSession for jobs and tests, from ``conf/spark-defaults.conf``."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any, Optional

from .datasource import register

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
    """The active SparkSession, or a new one, without overriding anybody's settings.

    * An active session is returned as it is; outside ``spark-submit``, a
      ``UserWarning`` names what this call asked for that it does not have
      (``master``, a setting of ``extra`` or of an explicit ``conf_dir``): stop it
      first to start one with them.
    * Under ``spark-submit`` (the JVM exists already), spark-submit has applied its
      command line, ``--conf`` and ``$SPARK_CONF_DIR/spark-defaults.conf``; of this
      call's settings only the SQL settings nobody set are added (the rest cannot
      change once the JVM runs).
    * Otherwise (plain ``python``, a notebook) the session is built from
      ``conf_dir/spark-defaults.conf`` (default ``$SPARK_CONF_DIR``; none if unset) and
      ``extra``, and ``conf_dir/log4j2.properties`` configures logging.

    ``master``, if given, is used when this call creates the session; without one,
    and with no master set anywhere, it is ``local[2]``.  Executors run this Python
    (``PYSPARK_PYTHON``), so they import the same timely_spark.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        if "PYSPARK_GATEWAY_PORT" not in os.environ:    # under spark-submit, its settings stand (below)
            _warn_unapplied(active, master, {**_file_settings(conf_dir), **(extra or {})})
        register(active)
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    conf_dir = conf_dir or os.environ.get("SPARK_CONF_DIR")
    settings: dict[str, str] = {}
    log4j = None
    if conf_dir and (Path(conf_dir) / "spark-defaults.conf").exists():
        settings.update(read_conf(Path(conf_dir) / "spark-defaults.conf"))
        log4j = Path(conf_dir) / "log4j2.properties"
    settings.update(extra or {})
    if "PYSPARK_GATEWAY_PORT" in os.environ:      # started by spark-submit: its settings stand
        spark = SparkSession.builder.appName(app_name).getOrCreate()
        given = dict(spark.sparkContext.getConf().getAll())
        for key, value in settings.items():
            if key.startswith("spark.sql.") and key not in given:
                spark.conf.set(key, value)
    else:
        if log4j is not None and log4j.exists() and "PYSPARK_SUBMIT_ARGS" not in os.environ:
            os.environ["PYSPARK_SUBMIT_ARGS"] = (
                f"--driver-java-options -Dlog4j2.configurationFile=file:{log4j.resolve()} pyspark-shell")
        builder = SparkSession.builder.appName(app_name)
        for key, value in settings.items():
            builder = builder.config(key, value)
        builder = builder.master(master or settings.get("spark.master", "local[2]"))
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark


def _file_settings(conf_dir: Optional[Any]) -> dict[str, str]:
    path = Path(conf_dir) / "spark-defaults.conf" if conf_dir else None
    return read_conf(path) if path is not None and path.exists() else {}


def _warn_unapplied(active: Any, master: Optional[str], settings: dict[str, str]) -> None:
    """A UserWarning naming the master and settings the active session does not have."""
    wanted = dict(settings, **({"spark.master": master} if master else {}))
    missed = {k: v for k, v in wanted.items() if active.conf.get(k, None) != v}
    if missed:
        have = ", ".join(f"{k}={active.conf.get(k, None)}" for k in missed)
        warnings.warn(f"ts.spark.get_session returns the active Spark session, which has {have}: "
                      f"{', '.join(f'{k}={v}' for k, v in missed.items())} not applied "
                      "(stop the active session first to start one with them)", UserWarning, stacklevel=3)
