"""``ts.spark.stream``: a streaming DataFrame in, one out, in one call, on the test session's
local[2] (one timely worker, one slot for the queries).

The pipeline of ``stream_pipeline_job.py`` (JSON files, one a micro-batch -> a running count
and sum per word, a changelog) is checked at every complete epoch against the batch
computation (pandas) of the input the pipeline's own input log holds up to that epoch,
and against the same pipeline assembled by hand (the timely sink, a ``ts.spark.run``
following its log, a second log); stopped and started again on its checkpoint, and its
driver SIGKILLed and started again: every epoch exactly once.  Bad input is refused at
the call, before anything starts."""

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import timely_spark as ts
from timely_spark.capture import LogIndex, ParquetEventWriter, follow
from timely_spark.capture.epoch_log import EpochLog
from timely_spark.errors import EventLogError, ParameterError, SparkSetupError, WorkerError
from timely_spark.graph import pagerank_reference

from .stream_pipeline_job import OUTPUT, counts, source

HERE = Path(__file__).resolve().parent
WORDS = 12


def write_files(folder, first, count, seed=5):
    """JSON files ``first .. first+count-1`` of random words, their times one second apart
    (the file source takes them in that order, one a micro-batch)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed + first)
    for i in range(first, first + count):
        path = folder / f"part-{i:04d}.json"
        rows = [{"word": f"w{rng.randrange(WORDS)}", "n": rng.randrange(100)} for _ in range(rng.randrange(5, 30))]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_000_000 + i, 1_000_000 + i))


def table(spark, log):
    return ts.spark.read_event_log(spark, str(log)).toArrow()


def check_every_epoch(spark, root, epochs):
    """At every epoch, the output folded up to it equals the counts and sums per word of
    the input up to it (each epoch once: a repeated epoch would count its rows twice)."""
    inputs = table(spark, root / "input").to_pandas()
    output = table(spark, root / "output")
    assert sorted(set(inputs["time"])) == list(range(epochs))
    assert set(output["time"].to_pylist()) == set(range(epochs))       # every epoch changes some word
    for e in range(epochs):
        upto = inputs[inputs["time"] <= e]
        want = upto.groupby("word")["n"].agg(["size", "sum"])
        want = sorted((w, int(c), int(s)) for w, (c, s) in want.iterrows())
        got = ts.collection(output.drop_columns(["worker"]), as_of=e)
        assert sorted(zip(*[got[c].to_pylist() for c in ("word", "count_all", "n_sum")])) == want, e


def changes_by_epoch(log_table):
    """Each epoch's changes, consolidated and in order (no worker column)."""
    rows = log_table.drop_columns(["worker"]).to_pylist()
    out = {}
    for r in rows:
        out.setdefault(r.pop("time"), []).append(tuple(sorted(r.items())))
    return {t: sorted(v) for t, v in out.items()}


def by_hand(spark, folder, root, epochs):
    """The same pipeline, assembled by hand: the timely sink, a ``ts.spark.run`` following its
    log into a second log, the sink stopped and its log closed once ``epochs`` epochs are in."""
    input_log, output_log = str(root / "input"), str(root / "output")
    schema = pa.schema([("word", pa.string()), ("count_all", pa.int64()), ("n_sum", pa.int64()),
                        ("diff", pa.int64())])
    query = (source(spark, folder).writeStream.format("timely")
             .option("checkpointLocation", str(root / "query")).start(input_log))

    def work(worker):
        writer = ParquetEventWriter(output_log, worker=worker.index, peers=worker.peers, flush_seconds=0.0,
                                    schema=schema)

        def build(scope):
            out = counts(scope, follow(input_log, scope))
            out.capture_into(writer)
            return out.probe()

        probe = worker.dataflow(build)
        worker.step_while(lambda: not probe.done())
        writer.close()

    outcome = {}
    job = threading.Thread(target=lambda: outcome.update(r=ts.spark.run(spark, work, workers=1, timeout=300)))
    job.start()
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if any((root / "input" / "worker=0").glob("part-*")) and \
                    not LogIndex(input_log).snapshot().frontier.less_equal(epochs - 1):
                break
            time.sleep(0.2)
    finally:
        query.stop()
        ts.spark.close_sink_log(input_log)
        job.join(300)
    assert outcome.get("r") == [None]
    return table(spark, root / "output")


@pytest.mark.timeout(180)
def test_bad_input_is_refused_at_the_call_before_anything_starts(any_spark, tmp_path):
    spark = any_spark               # the classic session, then Spark Connect
    batch = spark.range(5).selectExpr("id AS word")
    with pytest.raises(ParameterError, match=r"ts.spark.stream takes a streaming DataFrame.*batch DataFrame.*"
                                             r"ts.spark.transform\(df, build, schema\)"):
        ts.spark.stream(batch, counts, OUTPUT, checkpoint=str(tmp_path / "a"))
    write_files(tmp_path / "src", 0, 1)
    stream = source(spark, tmp_path / "src")
    with pytest.raises(ParameterError, match=r"ts.spark.transform takes a batch DataFrame.*ts.spark.stream"):
        ts.spark.transform(stream, counts, OUTPUT)
    with pytest.raises(ParameterError, match=r"output schema has column\(s\) \['time'\]"):
        ts.spark.stream(stream, counts, "time long, word string", checkpoint=str(tmp_path / "b"))
    with pytest.raises(ParameterError, match=r"input DataFrame has column\(s\) \['worker'\]"):
        ts.spark.stream(stream.withColumnRenamed("n", "worker"), counts, OUTPUT, checkpoint=str(tmp_path / "c"))
    with pytest.raises(ParameterError, match="needs checkpoint=DIR"):
        ts.spark.stream(stream, counts, OUTPUT, checkpoint=None)
    with pytest.raises(SparkSetupError, match=r"ts.spark.stream needs 3 task slots running at once -- 2 for the "
                                              r"timely workers .* and 1 .*the session has 2"):
        ts.spark.stream(stream, counts, OUTPUT, checkpoint=str(tmp_path / "d"), workers=2)
    assert not any((tmp_path / d).exists() for d in "abcd")
    EpochLog.create(tmp_path / "e" / "input", pa.schema([("word", pa.string()), ("n", pa.int32())]))
    with pytest.raises(EventLogError, match=r"e/input: the stream's columns .* differ from the log's .*column 'n'"):
        ts.spark.stream(stream, counts, OUTPUT, checkpoint=str(tmp_path / "e"))   # the input's schema changed
    assert not spark.streams.active and not (tmp_path / "e" / "state").exists()


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_an_output_that_does_not_fit_the_schema_is_named_and_the_pipeline_stops(any_spark, tmp_path):
    spark = any_spark               # the classic session, then Spark Connect
    write_files(tmp_path / "src", 0, 2)
    pipeline = ts.spark.stream(source(spark, tmp_path / "src"), counts, "word string, count_all long, total long, "
                               "diff long", checkpoint=str(tmp_path / "ckpt"), max_attempts=1)
    with pipeline, pytest.raises(WorkerError, match=r"SchemaMismatch: worker 0: the output has no column\(s\) "
                                                    r"\[.total.\]"):
        pipeline.await_epoch(1, timeout=240)
    assert not pipeline.is_active and not spark.streams.active
    assert not [t for t in threading.enumerate() if t.name == "timely_spark stream job"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_one_call_equals_the_pipeline_by_hand_and_the_batch_computation_across_a_stop(spark, tmp_path):
    folder, root = tmp_path / "src", tmp_path / "ckpt"
    write_files(folder, 0, 4)
    with ts.spark.stream(source(spark, folder), counts, OUTPUT, checkpoint=str(root), snapshot_every=1.0,
                         compact_every=2) as pipe:
        assert pipe.workers == 1
        lines = []
        pipe.await_epoch(3, timeout=300, report=lines.append)
        query = pipe.start_output(pipe.df.writeStream.format("memory").queryName("stream_pipeline_out"))
        query.processAllAvailable()
        progress = pipe.last_progress
    assert lines and lines[-1].startswith("epoch 3: ")
    assert not query.isActive and not spark.streams.active
    assert progress["epoch_in"] == progress["epoch_out"] == 3 and progress["lag_epochs"] == 0
    assert progress["rows_in"] == table(spark, root / "input").num_rows
    seen = spark.table("stream_pipeline_out").toArrow()             # the streaming DataFrame, diff and all
    assert seen.column_names == ["time", "worker", "word", "count_all", "n_sum", "diff"]
    assert changes_by_epoch(seen) == changes_by_epoch(table(spark, root / "output"))

    write_files(folder, 4, 3)                                       # more input while it is stopped
    with ts.spark.stream(source(spark, folder), counts, OUTPUT, checkpoint=str(root), snapshot_every=1.0,
                         compact_every=2) as pipe:
        pipe.await_epoch(6, timeout=300)
    check_every_epoch(spark, root, 7)
    for log in ("input", "output"):                                 # both logs compacted as they grew
        assert any(re.fullmatch(r"part-\d+-\d+\.parquet", p.name) for p in (root / log / "worker=0").iterdir()), log

    hand = by_hand(spark, folder, tmp_path / "hand", 7)
    assert changes_by_epoch(hand) == changes_by_epoch(table(spark, root / "output"))
    assert not spark.streams.active


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_driver_killed_mid_way_and_started_again_gives_every_epoch_once(spark, tmp_path):
    folder, root, epochs = tmp_path / "src", tmp_path / "ckpt", 12
    write_files(folder, 0, epochs)
    command = [sys.executable, str(HERE / "stream_pipeline_job.py"), str(folder), str(root), str(epochs)]
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    first = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    try:
        killed_at = None
        for line in first.stdout:          # "epoch N: ..." per output epoch
            if line.startswith("epoch ") and int(line.split()[1].rstrip(":")) >= 3:
                killed_at = int(line.split()[1].rstrip(":"))
                break
        assert killed_at is not None and killed_at < epochs - 1, "the first driver ended before it was killed"
    finally:
        os.killpg(first.pid, signal.SIGKILL)        # the driver, its JVM and its Python workers
        first.wait(60)
    second = subprocess.run(command, env=env, start_new_session=True, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    check_every_epoch(spark, root, epochs)
    output = table(spark, root / "output")
    assert pc.max(output["time"]).as_py() == epochs - 1


def components_by_union_find(edges):
    """``{vertex: smallest vertex of its component}`` of an edge list."""
    parent = {}

    def find(v):
        while parent.setdefault(v, v) != v:
            v = parent[v]
        return v

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {v: find(v) for v in parent}


def edge_changes(spark, folder, epochs):
    """A streaming DataFrame of string edge changes ``(src, dst, diff)``: ``epochs[i]``'s rows
    in micro-batch ``i`` (a JSON file each)."""
    folder.mkdir()
    for i, rows in enumerate(epochs):
        path = folder / f"edges-{i}.json"
        path.write_text("".join(json.dumps({"src": s, "dst": d, "diff": c}) + "\n" for s, d, c in rows))
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    return spark.readStream.schema("src string, dst string, diff long").option("maxFilesPerTrigger", 1) \
        .json(str(folder))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_graph_components_of_a_streaming_dataframe_of_string_edge_changes(any_spark, tmp_path):
    spark = any_spark               # the classic session, then Spark Connect
    epochs = [[("ann", "bob", 1), ("cy", "bob", 1), ("dan", "eve", 1)],
              [("fay", "gus", 1), ("eve", "cy", 1)],
              [("cy", "bob", -1), ("ann", "bob", 1)],
              [("eve", "cy", -1), ("hal", "ann", 1)]]
    edges = edge_changes(spark, tmp_path / "src", epochs)
    with pytest.raises(ParameterError, match=r"ts.graph.components takes a timely stream or a streaming "
                                             r"DataFrame.*batch DataFrame: use ts.graph.connected_components"):
        ts.graph.components(spark.createDataFrame([("a", "b")], "src string, dst string"), checkpoint="x")
    with ts.graph.components(edges, checkpoint=str(tmp_path / "ckpt")) as pipeline:
        pipeline.await_epoch(len(epochs) - 1, timeout=400)
    output = table(spark, tmp_path / "ckpt" / "output")
    assert output.schema.field("vertex").type == pa.string() and "diff" in output.column_names
    held = {}
    for e, rows in enumerate(epochs):
        for s, d, c in rows:
            held[(s, d)] = held.get((s, d), 0) + c
        want = components_by_union_find([k for k, n in held.items() if n > 0])
        got = ts.collection(output.drop_columns(["worker"]), as_of=e).to_pylist()
        assert {r["vertex"]: r["component"] for r in got} == want, e


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_graph_pagerank_stream_of_a_streaming_dataframe_within_its_output_contract(any_spark, tmp_path):
    spark = any_spark               # the classic session, then Spark Connect
    ring = [(f"v{i}", f"v{(i + 1) % 30}", 1) for i in range(30)]
    epochs = [ring + [("v0", "v15", 1), ("v3", "v20", 1)],
              [("v3", "v20", -1), ("v7", "v8", 1)],
              [("x", "y", 1)],                        # two new vertices beside the others
              [("v0", "v15", -1), ("v29", "v0", -1)]]
    edges = edge_changes(spark, tmp_path / "src", epochs)
    output_tolerance, tolerance, damping = 0.1, 1e-9, 0.85
    with ts.graph.pagerank_stream(edges, tolerance=tolerance, output_tolerance=output_tolerance,
                                  checkpoint=str(tmp_path / "ckpt")) as pipeline:
        pipeline.await_epoch(len(epochs) - 1, timeout=400)
    output = table(spark, tmp_path / "ckpt" / "output")
    assert output.schema.field("vertex").type == pa.string() and "diff" in output.column_names
    grown = output.filter(pc.equal(output["time"], 2))["vertex"].to_pylist()
    assert {"x", "y"} <= set(grown) and len(grown) <= 8       # not the 64 rows of every rank re-emitted
    held = {}
    for e, rows in enumerate(epochs):
        for s, d, c in rows:
            held[(s, d)] = held.get((s, d), 0) + c
        live = [k for k, n in held.items() for _ in range(n)]
        names = sorted({v for k in live for v in k})
        index = {v: i for i, v in enumerate(names)}
        want = pagerank_reference(np.array([index[s] for s, _ in live]), np.array([index[d] for _, d in live]),
                                  400, damping)
        got = {r["vertex"]: r["rank"] for r in ts.collection(output.drop_columns(["worker"]), as_of=e).to_pylist()}
        assert set(got) == set(names), e
        inner = 2 * len(names) * tolerance / (1 - damping)
        for v in names:
            assert abs(got[v] - want[index[v]]) <= output_tolerance * got[v] + inner, (e, v)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_streaming_components_example_resolves_many_entities_with_a_few_merges(tmp_path):
    done = subprocess.run([sys.executable, str(HERE.parents[1] / "jobs" / "examples" / "streaming_components.py"),
                           "--seconds", "4", "--rate", "200", "--workdir", str(tmp_path)],
                          env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"), capture_output=True, text=True,
                          timeout=540)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[-1].endswith("final entities equal the batch algorithm's: yes")
    records, entities = int(lines[-1].split()[0].replace(",", "")), int(lines[-1].split()[5].replace(",", ""))
    assert records >= 800 and records * 0.8 < entities < records      # many entities, some records joined
    assert len([line for line in lines if line.startswith("epoch ")]) >= 4
