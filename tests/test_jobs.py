"""The local jobs run as the README shows them."""

import subprocess

import pytest
import sys
from pathlib import Path

JOBS = Path(__file__).resolve().parent.parent / "jobs"


def run_job(name, *args, timeout=120):
    done = subprocess.run([sys.executable, str(JOBS / name), *args], capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_hello_timely_counts_each_epoch():
    out = run_job("hello_timely.py", "--threads", "2")
    lines = out.splitlines()
    assert lines[-1] == "19 (epoch, word) counts from 2 workers"
    the = [line for line in lines if "  the " in line]
    assert [line.split()[0:2] + line.split()[5:7] for line in the] == [
        ["epoch", "0", "count", "2"], ["epoch", "1", "count", "2"]]
    assert any("lazy       count 2  halvings to 1: 1" in line for line in lines)


def test_jobs_have_help():
    for job in ["hello_timely.py", "bench_engine.py", "bench_mesh.py", "connected_components.py",
                "wordcount.py", "bench_connected_components.py"]:
        assert "usage" in run_job(job, "--help")


def test_bench_engine_runs_small():
    out = run_job("bench_engine.py", "--records", "20000", "--rounds", "200", timeout=300)
    assert "timely/plain" in out and "us per round" in out


def test_bench_mesh_runs_small():
    out = run_job("bench_mesh.py", "--records", "40000", "--arrow-mb", "16", "--trips", "50", timeout=300)
    assert "records/s per worker" in out and "GB/s" in out and "per round trip" in out


@pytest.mark.slow
def test_bench_connected_components_runs_small():
    out = run_job("bench_connected_components.py", "--vertices", "2000", "--edges", "3000", timeout=600)
    assert "(b)/(a)" in out and "(a)/(c)" in out and "mesh set-up" in out
