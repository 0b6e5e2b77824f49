"""One run path: every way of running hands the run's Config whole to every worker
(``worker.config``), so a setting added to ``runtime.Config`` reaches them all."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import timely_spark as ts
from timely_spark.errors import ParameterError
from timely_spark.execute import execute_config, parse_args
from timely_spark.runtime import Config

ROOT = Path(__file__).resolve().parents[1]


def seen(worker):
    c = worker.config
    return [worker.index, c.timeout, c.peer_timeout, c.checkpoint, c.snapshot_every]


def test_threads_and_local_processes_hand_every_worker_the_config(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    want = [None, 40.0, 45.0, ckpt, 30.0]
    got = ts.execute(seen, threads=2, timeout=40, peer_timeout=45, checkpoint=ckpt, snapshot_every=30)
    assert got == [[0, *want[1:]], [1, *want[1:]]]
    got = ts.execute(seen, processes=2, timeout=40, peer_timeout=45, checkpoint=ckpt, snapshot_every=30)
    assert got == [[0, *want[1:]], [1, *want[1:]]]
    assert execute_config(seen, Config(threads=1, timeout=40, peer_timeout=45)) == [[0, 40.0, 45.0, None, None]]


def test_processes_started_by_hand_hand_every_worker_the_config(tmp_path):
    """Two processes started by hand with -p (the mesh on loopback), checkpoint flags included."""
    job = tmp_path / "job.py"
    job.write_text("import json, sys, timely_spark as ts\n"
                   "def seen(w):\n"
                   "    c = w.config\n"
                   "    return [w.index, c.timeout, c.peer_timeout, c.checkpoint, c.snapshot_every]\n"
                   "if __name__ == '__main__':\n"
                   "    print(json.dumps(ts.execute_from_args(seen, sys.argv[1:])), flush=True)\n")
    hosts = tmp_path / "hosts"
    import socket

    ports = []
    for _ in range(2):      # two free ports (closed again: the processes bind them)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    hosts.write_text("".join(f"127.0.0.1:{p}\n" for p in ports))
    ckpt = str(tmp_path / "ckpt")
    env = dict(os.environ, TIMELY_SPARK_SECRET="s3cret", PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, str(job), "-n", "2", "-p", str(p), "-h", str(hosts),
                               "--timeout", "60", "--peer-timeout", "20", "--checkpoint", ckpt,
                               "--snapshot-every", "7"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for p in range(2)]
    outs = [p.communicate(timeout=90) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-2000:] for _, e in outs]
    import json

    assert [json.loads(o.strip().splitlines()[-1]) for o, _ in outs] == [
        [[i, 60.0, 20.0, ckpt, 7.0]] for i in range(2)]


def test_checkpoint_flags_parse_and_are_refused_by_flag():
    config, rest = parse_args(["--checkpoint", "/mnt/shared/ckpt", "--snapshot-every", "2.5", "--mine"])
    assert (config.checkpoint, config.snapshot_every, rest) == ("/mnt/shared/ckpt", 2.5, ["--mine"])
    assert parse_args([])[0].checkpoint is None
    for argv, flag in [(["--snapshot-every", "soon"], "--snapshot-every"),
                       (["--checkpoint", "/d", "--snapshot-every", "0"], "--snapshot-every"),
                       (["--checkpoint", "/d", "--snapshot-every", "inf"], "--snapshot-every"),
                       (["--checkpoint", ""], "--checkpoint"),
                       (["--snapshot-every", "5"], "--snapshot-every")]:     # no --checkpoint to snapshot into
        with pytest.raises(ParameterError, match=flag) as err:
            ts.execute_from_args(lambda w: None, argv)
        assert err.value.parameter == flag


def test_run_process_keeps_the_timeouts_of_its_config():
    """run_process(config=...) without timeout keywords runs with the config's timeouts
    (not the defaults); keywords given still replace them."""
    import threading

    from timely_spark.communication.tcp import bind_listener
    from timely_spark.process import run_process

    listeners = [bind_listener() for _ in range(2)]
    addresses = [s.getsockname() for s in listeners]
    config = Config(timeout=50, peer_timeout=41, connect_timeout=33)
    results: list = [None, None]

    def one(p, **kw):
        results[p] = run_process(lambda w: [w.config.timeout, w.config.peer_timeout, w.config.connect_timeout],
                                 p, 2, 1, addresses, listeners[p], b"k", config=config, **kw)

    threads = [threading.Thread(target=one, args=(0,)),
               threading.Thread(target=one, args=(1,), kwargs=dict(peer_timeout=42))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == [[[50.0, 41.0, 33.0]], [[50.0, 42.0, 33.0]]]
