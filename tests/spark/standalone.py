"""A Spark standalone cluster for tests: a master and workers, each its own JVM started from
the pip package's ``bin/spark-class``, on loopback and free ports.  Every process runs in a
process group of its own, ended (SIGTERM, then SIGKILL) when the block exits -- whatever
happens -- and at interpreter exit as a last resort; an executor a worker launched, and
its Python workers, are in the worker's group."""

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
STARTUP = 120.0         # seconds for the master and every worker to register


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def end_group(proc: subprocess.Popen) -> None:
    """End ``proc``'s whole process group (bounded waits)."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
        try:
            os.killpg(proc.pid, 0)          # children of the group still alive: go on
        except ProcessLookupError:
            return


def spark_env(workdir: Path) -> dict:
    return dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1",
                PYSPARK_PYTHON=sys.executable, SPARK_DAEMON_MEMORY="256m", SPARK_LOG_DIR=str(workdir / "logs"),
                SPARK_WORKER_DIR=str(workdir / "work"))


def alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as answer:
            return int(json.load(answer).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


@contextmanager
def standalone_cluster(workdir: Path, workers: int = 2, cores: int = 1, memory: str = "1g"):
    """Yield the master's URL (``spark://127.0.0.1:PORT``) once ``workers`` workers of
    ``cores`` cores have registered; every process is ended on exit."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = spark_env(workdir)
    procs: list = []

    def start(name: str, *args: str) -> None:
        log = open(workdir / f"{name}.log", "wb")
        procs.append(subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], env=env, stdout=log,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True))
        log.close()

    def end_all() -> None:
        for proc in reversed(procs):
            end_group(proc)

    atexit.register(end_all)
    try:
        port, ui = free_port(), free_port()
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
              "--webui-port", str(ui))
        url = f"spark://127.0.0.1:{port}"
        for i in range(workers):
            start(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                  "--webui-port", str(free_port()), "--cores", str(cores), "--memory", memory,
                  "--work-dir", str(workdir / "work"))
        deadline = time.monotonic() + STARTUP
        while alive_workers(ui) < workers:
            dead = [p.args[1] for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join((workdir / f).read_text(errors="replace")[-2000:]
                                 for f in sorted(os.listdir(workdir)) if f.endswith(".log"))
                raise RuntimeError(f"the standalone cluster did not start ({dead or 'timed out'}):\n{logs}")
            time.sleep(0.5)
        yield url
    finally:
        end_all()
        atexit.unregister(end_all)


def submit(args: list, env: dict, timeout: float) -> tuple[int, str, str]:
    """``spark-submit ARGS`` in a process group of its own, ended whatever happens:
    ``(return code, stdout, stderr)``."""
    proc = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-submit"), *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err
    finally:
        end_group(proc)
