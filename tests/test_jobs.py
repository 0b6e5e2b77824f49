"""The local jobs (``jobs/examples``) and benchmarks (``jobs/benchmarks``) run as the docs show them."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .machine_paths import machine_folders

JOBS = Path(__file__).resolve().parent.parent / "jobs"


def run_job(name, *args, timeout=90, env=None):
    done = subprocess.run([sys.executable, str(JOBS / name), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def job_module(name):
    """A job's module, loaded from its file (its constants: what a test runs of it)."""
    spec = importlib.util.spec_from_file_location(Path(name).stem, JOBS / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_hello_timely_counts_each_epoch():
    out = run_job("examples/hello_timely.py", "--threads", "2")
    lines = out.splitlines()
    assert lines[-1] == "19 (epoch, word) counts from 2 workers"
    the = [line for line in lines if "  the " in line]
    assert [line.split()[0:2] + line.split()[5:7] for line in the] == [
        ["epoch", "0", "count", "2"], ["epoch", "1", "count", "2"]]
    assert any("lazy       count 2  halvings to 1: 1" in line for line in lines)


@pytest.mark.parametrize("job", sorted(str(p.relative_to(JOBS)) for p in JOBS.glob("*/*.py")))
def test_every_job_has_help_and_no_machine_path(job):
    """Each job answers --help; none names a folder of one machine or carries its own Spark conf directory
    (``ts.spark.get_session(app)`` is the one way the jobs get a session)."""
    assert "usage" in run_job(job, "--help")
    text = (JOBS / job).read_text()
    assert not any(folder in text for folder in machine_folders(JOBS.parent)) and "conf_dir" not in text


def test_jobs_are_examples_or_benchmarks():
    assert sorted(p.name for p in JOBS.glob("*.py")) == []
    assert all(p.name.startswith("bench_") for p in JOBS.glob("benchmarks/*.py"))
    assert not any(p.name.startswith("bench_") for p in JOBS.glob("examples/*.py"))


def test_bench_engine_runs_small():
    out = run_job("benchmarks/bench_engine.py", "--records", "20000", "--rounds", "200", timeout=90)
    assert "timely/plain" in out and "us per round" in out


@pytest.mark.slow
def test_bench_mesh_runs_small():
    out = run_job("benchmarks/bench_mesh.py", "--records", "40000", "--arrow-mb", "16", "--trips", "50",
                  "--epochs", "50", timeout=90)
    assert "records/s per worker" in out and "GB/s per direction" in out and "per round trip" in out
    assert "an epoch across 2 processes" in out and "feedback-loop round" in out and "AES-256-GCM" in out


@pytest.mark.slow
@pytest.mark.timeout(330)
def test_bench_rounds_runs_small(tmp_path):
    out = run_job("benchmarks/bench_rounds.py", "--only", "loop,epoch,epoch_threads,components,pagerank,spark",
                  "--rounds", "200", "--trips", "50", "--edges", "3000", "--changes", "20", "--epochs", "3",
                  "--switch-interval", "0.001", "--parts", "--spark-edges", "3000",
                  timeout=300, env=dict(os.environ, TMPDIR=str(tmp_path)))   # (the spark row's graph file)
    assert "us a round (" in out and "us of CPU" in out and "us of CPU, both workers" in out
    assert "2 threads of one process (the same dataflow), switch interval 1 ms" in out
    assert "steps, " in out and " frames sent, " in out       # the epoch's parts
    assert " wake-ups, " in out and " preemptions)" in out
    assert out.count("ms of CPU, both workers") == 8 and "batch form from scratch" in out
    assert out.count("  the same epochs on 1 worker thread: median ") == 2
    assert out.count("  the same epochs on 2 worker processes: median ") == 2
    assert out.count("rows emitted per changed edge") == 4 and "output_tolerance=0" in out
    # the components rows' rounds and search, and their parts (a second run, methods wrapped)
    assert out.count("rounds per epoch 2 (max 2)") == 1 and out.count("split search visits per epoch") == 2
    assert out.count("its parts (") == 2 and out.count("the labels operator (ComponentLabels.step): ") == 2
    # the spark row: bench_graph.py's Spark methods (checked against scipy) beside local threads
    spark = [line for line in out.splitlines() if line.startswith("components of 3,000 edges, warm runs: ")]
    assert len(spark) == 1 and "from a cached DataFrame" in spark[0] and spark[0].count("(ratio ") == 2


@pytest.mark.slow
@pytest.mark.timeout(330)
def test_bench_connected_components_runs_small():
    out = run_job("benchmarks/bench_connected_components.py", "--vertices", "2000", "--edges", "3000", timeout=300)
    assert "(b)/(a)" in out and "(a)/(c)" in out and "mesh set-up" in out


def test_barrier_demo_resynchronizes():
    out = run_job("examples/barrier_demo.py", "-w", "2", "--rounds", "3", "--unit", "0.1")
    lines = [line.split() for line in out.splitlines()]
    assert len(lines) == 6
    for r in range(3):
        after = [float(line[3].rstrip("s")) for line in lines if line[1] == "0:"][r], \
                [float(line[3].rstrip("s")) for line in lines if line[1] == "1:"][r]
        before1 = [float(line[2].rstrip("s")) for line in lines if line[1] == "1:"][r]
        assert min(after) >= before1 - 0.001      # nobody left before worker 1 arrived


def test_sequencer_demo_shows_one_order():
    out = run_job("examples/sequencer_demo.py", "-w", "2", "--rounds", "3", "--unit", "0.05")
    seen = {0: [], 1: []}
    for line in out.splitlines():
        parts = line.split("\t")
        seen[int(parts[1].split()[1].rstrip(":"))].append(parts[2].split("recv'd: ")[1])
    assert seen[0] == seen[1] and len(seen[0]) == 6


def test_bench_sync_runs_small():
    out = run_job("benchmarks/bench_sync.py", "--rounds", "200", "--no-spark", timeout=90)
    assert "Barrier, 2 processes" in out and "median" in out


@pytest.mark.slow
@pytest.mark.timeout(330)
def test_bench_capture_runs_small():
    out = run_job("benchmarks/bench_capture.py", "--records", "20000", "--epochs", "20", "--repeats", "1",
                  "--stream-epochs", "3", "--stream-interval", "0.3", timeout=300)
    assert "capture / Spark write" in out and "the ceiling of a Python data source" in out


@pytest.mark.slow
@pytest.mark.timeout(330)
def test_bench_graph_runs_small_and_every_method_agrees(tmp_path):
    # every quick method but cc-spark and cc-spark-cached, which the spark row of bench_rounds.py runs
    # (test_bench_rounds_runs_small)
    methods = [m for m, slow in job_module("benchmarks/bench_graph.py").METHODS
               if not slow and m not in ("cc-spark", "cc-spark-cached")]
    out = run_job("benchmarks/bench_graph.py", "--sizes", "3000", "--only", ",".join(methods),
                  "--data", str(tmp_path), timeout=300)
    assert "all methods agree" in out      # the benchmark checks each method's result against the references
    for method in ("cc-spark-cached-workers", "pagerank-local", "paths-scipy", "warm run phases",
                   "worker 3: peak rows kept"):
        assert method in out


@pytest.mark.timeout(330)
@pytest.mark.slow
def test_bench_graph_string_id_methods_run_and_agree(tmp_path):
    out = run_job("benchmarks/bench_graph.py", "--sizes", "3000", "--data", str(tmp_path),
                  "--only", "cc-local,cc-local-strings,pagerank-local,pagerank-local-strings", timeout=300)
    assert "all methods agree" in out and out.count("[ok]") == 2


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_bench_graph_spark_writes_large_results_as_parquet(tmp_path):
    # above --collect-up-to edges a Spark method's result is written by Spark's executors
    # (not collected on the driver with toArrow), and still checked against scipy's
    out = run_job("benchmarks/bench_graph.py", "--sizes", "3000", "--collect-up-to", "0", "--warm-up-to", "0",
                  "--only", "cc-scipy,cc-spark", "--data", str(tmp_path), timeout=180)
    assert "all methods agree" in out
    assert out.count("result via Spark's Parquet writer") == 1
    assert (tmp_path / "edges-3000-1.parquet.cc-spark.result.parquet").is_dir()


def test_bench_nexmark_runs_small():
    out = run_job("benchmarks/bench_nexmark.py", "--events", "20000", "--batch", "5000", "--rate", "1000",
                  "--queries", "q0,q4,q5", "--no-spark", timeout=90)
    assert "M events/s on one thread" in out and "vs Feldera" in out
    assert [line.split()[0] for line in out.splitlines()[-3:]] == ["q0", "q4", "q5"]


@pytest.mark.slow
def test_bench_tpch_runs_small():
    out = run_job("benchmarks/bench_tpch.py", "--sf", "0.01", "--refreshes", "2", "--queries", "q1,q14",
                  "--no-spark", timeout=90)
    assert "first load" in out and "MB/worker" in out
    assert [line.split()[0] for line in out.splitlines()[-2:]] == ["q1", "q14"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_bench_streaming_runs_small():
    """ts.spark.stream and the Spark-only peer at 200 records/s for 8 s (records withdrawn 5 files
    later), one sweep rate for 5 s: every line the 10-minute run prints is there, and the final
    entities equal the batch algorithm's on the records still held."""
    out = run_job("benchmarks/bench_streaming.py", "--seconds", "8", "--rate", "200", "--window", "5",
                  "--sweep", "400", "--sweep-seconds", "5", timeout=540)
    assert "timely ts.spark.stream, input file -> output row (foreachBatch): median" in out
    assert "Spark-only groupBy().count() update mode, input file -> foreachBatch: median" in out
    assert "output log commit -> output query's foreachBatch" in out and "all of it" in out
    assert "highest sustained rate tried, timely:" in out and "timely worker RSS (MiB) in each minute" in out
    assert out.splitlines()[-1] == "every timely run's final entities equal the batch algorithm's: yes"
