"""A SparkSession for jobs, notebooks and tests: the package's quiet defaults under anybody's settings."""

from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any, Optional

from .datasource import register
from .package_data import package_text
from .preflight import task_slots
from .quiet import LOG4J, spark_default_logging, use_package_logging

__all__ = ["read_conf", "get_session", "package_defaults", "DEFAULTS"]

DEFAULTS = Path(__file__).with_name("spark-defaults.conf")
# A collected result needs a driver heap of several times its size while the driver fetches and
# converts it: spark.driver.maxResultSize defaults to the driver's memory over this.
DRIVER_MEMORY_PER_RESULT = 6


def read_conf(path: Any) -> dict[str, str]:
    """The ``key value`` pairs of a spark-defaults.conf file (comments and blanks skipped)."""
    return parse_conf(Path(path).read_text())


def parse_conf(text: str) -> dict[str, str]:
    """The ``key value`` pairs of a spark-defaults.conf text (comments and blanks skipped).

    >>> parse_conf(chr(10).join(["# a comment", "spark.ui.enabled false", ""]))
    {'spark.ui.enabled': 'false'}
    """
    conf: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        conf[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
    return conf


def get_session(app_name: str, master: Optional[str] = None, conf_dir: Optional[Any] = None,
                extra: Optional[dict[str, str]] = None) -> Any:
    """The active SparkSession, or a new one with the package's quiet defaults, without
    overriding anybody's settings.

    * An active session is returned as it is; outside ``spark-submit``, a
      ``UserWarning`` names what this call asked for that it does not have
      (``master``, a setting of ``extra`` or of an explicit ``conf_dir``): stop it
      first to start one with them (``ts.spark.quiet(spark)`` makes its logs quiet).
    * Otherwise (plain ``python``, a notebook) the session is built from the package's
      defaults (:data:`DEFAULTS`), over them ``conf_dir/spark-defaults.conf`` (default
      ``$SPARK_CONF_DIR``; none if unset), over both ``extra``.  Logging:
      ``conf_dir/log4j2.properties`` if there is one, else the package's
      (:data:`~timely_spark.spark.quiet.LOG4J`), unless ``-Dlog4j2.configurationFile``
      was given already (in ``spark.driver.extraJavaOptions`` or ``PYSPARK_SUBMIT_ARGS``).
    * Under ``spark-submit`` (the JVM exists already), spark-submit has applied its
      command line, ``--conf`` and ``$SPARK_CONF_DIR/spark-defaults.conf``; of this
      call's settings only the SQL settings nobody set are added, and of the package's
      defaults those nobody set; the driver logs with the package's log4j configuration
      if it has Spark's default one (nobody configured log4j).

    Either way, unless somebody set ``spark.sql.shuffle.partitions``, it is the
    session's task slots (not Spark's 200).  ``master``, if given, is used when this
    call creates the session; without one, and with no master set anywhere, it is
    ``local[2]``.  Executors run this Python (``PYSPARK_PYTHON``), so they import the
    same timely_spark.
    """
    from pyspark import SparkConf, SparkContext
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
    chosen = {**_file_settings(conf_dir), **(extra or {})}
    if "PYSPARK_GATEWAY_PORT" in os.environ:      # started by spark-submit: its settings stand
        SparkContext._ensure_initialized()
        given = dict(SparkConf().getAll())
        defaults = package_defaults(given.get("spark.master", "local[*]"), given.get("spark.driver.memory", "1g"))
        wanted = {**defaults, **{k: v for k, v in chosen.items() if k.startswith("spark.sql.")}}
        settings = {k: v for k, v in wanted.items() if k not in given}
        if spark_default_logging(SparkContext._jvm):
            use_package_logging(SparkContext._jvm)
    else:
        master = master or chosen.get("spark.master", "local[2]")
        defaults = package_defaults(master, chosen.get("spark.driver.memory", "1g"))
        settings = {**defaults, **chosen, "spark.master": master}
        _with_log4j(settings, Path(conf_dir) / "log4j2.properties" if conf_dir else LOG4J)
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if not spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        sc = spark.sparkContext
        spark.conf.set("spark.sql.shuffle.partitions", str(task_slots(sc) or sc.defaultParallelism))
    register(spark)
    return spark


def package_defaults(master: str, driver_memory: str = "1g") -> dict[str, str]:
    """The package's Spark settings (:data:`DEFAULTS`) for a session on ``master`` whose
    driver has ``driver_memory`` (``spark.driver.memory``): on a local master, the driver
    listens on 127.0.0.1 only; ``spark.driver.maxResultSize`` is a sixth of the driver's
    memory, so that Spark refuses a collected result too large for the driver's heap
    (which holds a few copies of it) with an error, before it runs out of memory.

    >>> package_defaults("local[2]")["spark.ui.showConsoleProgress"]
    'false'
    >>> package_defaults("yarn", "6g")["spark.driver.maxResultSize"], "spark.driver.host" in package_defaults("yarn")
    ('1024m', False)
    """
    local = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    result = {"spark.driver.maxResultSize": f"{max(1, _mib(driver_memory) // DRIVER_MEMORY_PER_RESULT)}m"}
    defaults = parse_conf(package_text(DEFAULTS.name))   # (also inside a zip shipped with --py-files)
    return {**defaults, **result, **(local if master.startswith("local") else {})}


def _mib(size: str) -> int:
    """Spark's memory size ``size`` (``"4g"``, ``"512m"``, ``"2048"``: MiB) in MiB; 1024 if unreadable."""
    found = re.fullmatch(r"(\d+)([kmgt]?)i?b?", size.strip().lower())
    if found is None:
        return 1024
    return int(found.group(1)) * 1024 ** "kmgt".index(found.group(2) or "m") // 1024


def _with_log4j(settings: dict[str, str], log4j: Path) -> None:
    """Start the driver JVM with ``log4j`` (the package's when it does not exist), unless
    a log4j configuration file was given already."""
    options = settings.get("spark.driver.extraJavaOptions", "")
    if "log4j2.configurationFile" in options + os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        return
    path = log4j if log4j.exists() else LOG4J
    if not path.is_file():         # the package imported from a zip: no file for the JVM to read
        return
    given = f"-Dlog4j2.configurationFile={path.resolve().as_uri()}"
    settings["spark.driver.extraJavaOptions"] = f"{options} {given}".strip()


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
