"""Spark's driver logs without the walls of text a failed action prints before its error.

When a task fails, Spark's driver logs the task's whole error -- a Python traceback and
a Java stack -- once as the executor's ``Exception in task`` (local masters run the
executors in the driver's JVM) and once as the scheduler's ``Lost task``, for every task
and every stage attempt: hundreds of lines, all of them in the error the action raises.
The package's log4j configuration, :data:`LOG4J` (``log4j2.properties`` beside this
module), keeps Spark's warnings and errors but drops those repeats (and a few notices
of every streaming query); ``ts.spark.get_session`` starts the JVM with it when nothing
else configures log4j, and :func:`quiet` drops the same messages on a session that
runs already.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Optional

from .package_data import package_text

__all__ = ["quiet", "LOG4J", "dropped_messages", "spark_default_logging", "use_package_logging"]

log = logging.getLogger(__name__)

LOG4J = Path(__file__).with_name("log4j2.properties")


def dropped_messages(path: Optional[Path] = None) -> dict[str, list[str]]:
    """The messages a log4j2 properties file drops: ``logger name -> [regex]`` of its
    loggers' ``RegexFilter`` s that deny what they match.

    >>> dropped_messages()["org.apache.spark.scheduler.TaskSetManager"]
    ['(?s)Lost task .*']
    """
    props: dict[str, str] = {}
    text = path.read_text() if path is not None else package_text(LOG4J.name)   # (also inside a zip)
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    dropped: dict[str, list[str]] = {}
    for key, value in props.items():
        found = re.fullmatch(r"(logger\.[\w-]+\.)filter\.[\w-]+\.type", key)
        if found and value == "RegexFilter" and props.get(key[:-len("type")] + "onMatch") == "DENY":
            dropped.setdefault(props[found.group(1) + "name"], []).append(props[key[:-len("type")] + "regex"])
    return dropped


def quiet(spark: Any) -> None:
    """Make a running session's driver log as quiet as ``ts.spark.get_session``'s:
    a failed action prints its error, not hundreds of lines of traces before it.

    Drops the messages the package's log4j configuration drops (:data:`LOG4J`: each
    failed task's error, logged by the executor and by the scheduler for every task and
    stage attempt -- the action raises it anyway, with Spark's error as its
    ``__cause__`` -- and notices every streaming query prints) and stops the console
    progress bar.  Log levels stay as the session has them
    (``spark.sparkContext.setLogLevel`` changes them).  Idempotent.  Over Spark Connect
    (no driver JVM here) it does nothing.

        spark = SparkSession.builder.getOrCreate()
        ts.spark.quiet(spark)
    """
    try:
        sc = spark.sparkContext
        jvm = sc._jvm
    except Exception:  # Spark Connect: the driver's logs are not this process's
        return
    log4j = jvm.org.apache.logging.log4j
    context = log4j.LogManager.getContext(False)
    config = context.getConfiguration()
    deny, neutral = (getattr(log4j.core, "Filter$Result").valueOf(r) for r in ("DENY", "NEUTRAL"))
    for name, regexes in dropped_messages().items():
        logger = config.getLoggerConfig(name)     # its own, or the nearest configured ancestor's (root)
        for regex in regexes:
            if regex not in str(logger.getFilter()):
                logger.addFilter(log4j.core.filter.RegexFilter.createFilter(regex, None, False, deny, neutral))
    context.updateLoggers()
    progress = sc._jsc.sc().progressBar()
    if progress.isDefined():
        progress.get().stop()


def spark_default_logging(jvm: Any) -> bool:
    """Whether the driver JVM logs with Spark's default log4j profile (nobody configured
    log4j: no ``log4j2.properties`` on the class path, no ``-Dlog4j2.configurationFile``)."""
    config = jvm.org.apache.logging.log4j.LogManager.getContext(False).getConfiguration()
    location = config.getConfigurationSource().getLocation()
    return location is None or "log4j2-defaults" in str(location)


def use_package_logging(jvm: Any) -> None:
    """Reconfigure the running driver JVM's log4j with the package's :data:`LOG4J`.

    Spark reloads its default profile when a SparkContext starts if it loaded it before
    (spark-submit's JVM has): it is told that its profile is not in use any more (a
    flag of Spark's ``Logging``; where a Spark version has none, the context's start
    prints Spark's INFO banner, and the package's configuration holds from then on)."""
    if not LOG4J.is_file():        # the package imported from a zip: no file for the JVM to read
        return
    jvm.org.apache.logging.log4j.LogManager.getContext(False).setConfigLocation(jvm.java.net.URI(LOG4J.resolve().as_uri()))
    try:
        spark_logging = getattr(getattr(jvm.org.apache.spark.internal, "Logging$"), "MODULE$")
        getattr(spark_logging, "org$apache$spark$internal$Logging$$defaultSparkLog4jConfig_$eq")(False)
    except Exception:  # py4j: no such member in this Spark version
        log.debug("Spark's logging has no default-profile flag here; its context will print its banner")
