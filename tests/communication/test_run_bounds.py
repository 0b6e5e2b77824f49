"""Runs are bounded: a run deadline stops every worker, worker processes never outlive
the process that started them, and malformed parameters are refused by name."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import timely_spark as ts

ROOT = Path(__file__).resolve().parents[2]


def stepping_forever(worker):
    """A worker whose dataflow never completes: its input is never advanced or closed."""
    inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.probe()))(*s.new_input("Stuck")))
    while True:
        worker.step()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("layout", [dict(threads=1), dict(threads=2), dict(processes=2)],
                         ids=["1 thread", "2 threads", "2 processes"])
@pytest.mark.slow
def test_a_run_that_never_ends_stops_at_its_timeout(layout):
    start = time.monotonic()
    with pytest.raises(ts.RunTimeout) as err:
        ts.execute(stepping_forever, timeout=3, **layout)
    assert time.monotonic() - start < 3 + 15
    assert isinstance(err.value, TimeoutError) and err.value.timeout == 3
    assert "Dataflow0" in str(err.value)
    assert set(err.value.incomplete) == set(range(layout.get("threads", 1) * layout.get("processes", 1)))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("layout", [dict(threads=2), dict(processes=2)], ids=["threads", "processes"])
@pytest.mark.slow
def test_a_worker_stuck_in_its_own_code_is_reported_and_no_process_is_left(tmp_path, layout):
    folder = str(tmp_path)

    def work(worker):
        with open(os.path.join(folder, f"{os.getpid()}-{worker.index}"), "w"):
            pass
        if worker.index == 1:
            time.sleep(60)                         # never steps again (a thread cannot be killed)
        return worker.index

    start = time.monotonic()
    with pytest.raises(ts.RunTimeout, match="worker 1: still in its own code") as err:
        ts.execute(work, timeout=5, **layout)
    assert time.monotonic() - start < 5 + 15
    assert err.value.timeout == 5
    pids = {int(p.name.split("-")[0]) for p in tmp_path.iterdir()} - {os.getpid()}
    assert len(pids) == (2 if "processes" in layout else 0)
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in pids if alive(p)] == [], "a worker process outlived the run"


PARENT = textwrap.dedent("""
    import os, sys, time
    import timely_spark as ts

    folder = sys.argv[1]

    def work(worker):
        with open(os.path.join(folder, str(os.getpid())), "w"):
            pass
        time.sleep(600)

    ts.execute(work, processes=2)
""")


def worker_pids(folder: Path) -> list[int]:
    return [int(p.name) for p in folder.iterdir()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:                       # a zombie is not alive
        return f.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.timeout(90)
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_worker_processes_end_when_the_starting_process_dies(tmp_path, sig):
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path)], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                              stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while len(worker_pids(tmp_path)) < 2:
        assert time.monotonic() < deadline, "the worker processes did not start"
        assert parent.poll() is None, "the starting process died early"
        time.sleep(0.1)
    pids = worker_pids(tmp_path)
    os.kill(parent.pid, sig)
    parent.wait(timeout=30)
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in pids if alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert left == [], f"worker processes {left} outlived the starting process ({sig.name})"


def test_malformed_parameters_are_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="threads"):
        ts.execute(lambda w: None, threads=0)
    with pytest.raises(ValueError, match="processes"):
        ts.execute(lambda w: None, processes="2")
    with pytest.raises(ValueError, match="timeout"):
        ts.execute(lambda w: None, timeout=-1)
    with pytest.raises(ValueError, match="peer_timeout"):
        ts.execute(lambda w: None, peer_timeout=0)
    with pytest.raises(ValueError, match="timeout"):
        ts.execute_from_args(lambda w: None, ["--timeout", "-5"])
    with pytest.raises(ValueError, match="timeout"):
        ts.execute(lambda w: None, timeout=float("inf"))
    for argv, flag in [(["-w", "abc"], "-w/--threads"), (["-w", "0"], "-w/--threads"),
                       (["-n", "two"], "-n/--processes"), (["-n", "2", "-p", "-1"], "-p/--process"),
                       (["-n", "2", "-p", "2"], "-p/--process"), (["--timeout", "soon"], "--timeout"),
                       (["--timeout", "0"], "--timeout"), (["--peer-timeout", "-3"], "--peer-timeout"),
                       (["--peer-timeout", "nan"], "--peer-timeout")]:
        with pytest.raises(ValueError, match=flag):
            ts.execute_from_args(lambda w: None, argv)
    from timely_spark.communication.tcp import bind_listener
    from timely_spark.execute import run_process

    listener = bind_listener()
    two = [("127.0.0.1", 1), listener.getsockname()]
    for kw, name in [(dict(peer_timeout=0), "peer_timeout"), (dict(timeout=-2), "timeout"),
                     (dict(connect_timeout=None), "connect_timeout"), (dict(processes="2"), "processes"),
                     (dict(threads=0), "threads"), (dict(process=2), "process")]:
        args = {**dict(process=1, processes=2, threads=1), **kw}
        with pytest.raises(ValueError, match=name):
            run_process(lambda w: None, args.pop("process"), args.pop("processes"), args.pop("threads"), two,
                        listener, b"k", **args)
    listener.close()
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1:2101\n")
    with pytest.raises(ValueError, match="2 processes .-n. but 1 host:port lines"):
        ts.execute_from_args(lambda w: None, ["-n", "2", "-p", "0", "-h", str(hosts)])
    hosts.write_text("127.0.0.1:70000\n127.0.0.1:2\n")
    with pytest.raises(ValueError, match="line 1: port must be in 0..65535"):
        ts.execute_from_args(lambda w: None, ["-n", "2", "-p", "0", "-h", str(hosts)])
