"""Parquet event logs: layout, round trips, replay through Parquet, bad input, a killed writer."""

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import timely_spark as ts
from timely_spark import Product
from timely_spark.capture import (
    EventLogError,
    Messages,
    ParquetEventReader,
    ParquetEventWriter,
    Progress,
    extract,
    replay_into,
)

ROOT = Path(__file__).resolve().parents[2]


def capture_epochs(path, records_by_epoch, workers=1, flush_seconds=0.0):
    def work(worker):
        writer = ParquetEventWriter(path, worker.index, worker.peers, flush_seconds=flush_seconds)

        def build(scope):
            inp, stream = scope.new_input()
            stream.capture_into(writer)
            return inp

        inp = worker.dataflow(build)
        for epoch, records in enumerate(records_by_epoch):
            inp.advance_to(epoch)
            if worker.index == 0:
                inp.send_batch(records)
            worker.step()
        inp.close()
        while worker.step():
            pass
        writer.close()

    ts.execute(work, threads=workers, timeout=30)


@pytest.mark.parametrize("records", [
    [{"word": "a", "n": 1}, {"word": "b", "n": 2}],
    [(1, "x", 2.5), (2, "y", 3.5)],
    [3, 1, 2],
    [["a", "list"], {"nested": {"x": 1}}],          # not Arrow-typable as columns: pickled
], ids=["dicts", "tuples", "scalars", "pickled"])
def test_round_trip_per_time(tmp_path, records):
    capture_epochs(tmp_path, [records, records[:1]])
    got = extract(iter(ParquetEventReader(tmp_path, allow_pickle=True)))
    def norm(xs):
        return sorted(xs, key=repr)
    assert [(t, norm(xs)) for t, xs in got] == [(0, norm(records)), (1, norm(records[:1]))]


def test_layout_is_typed_columns_that_pyarrow_reads(tmp_path):
    capture_epochs(tmp_path, [[{"word": "a", "n": 1}], [{"word": "b", "n": 2}]])
    files = sorted((tmp_path / "worker=0").glob("part-*.parquet"))
    assert files and (tmp_path / "worker=0" / "_CLOSED").exists()
    table = pq.read_table(tmp_path / "worker=0")
    assert {"seq", "kind", "time", "diff", "word", "n"} <= set(table.column_names)
    assert table.schema.field("time").type == pa.int64() and table.schema.field("n").type == pa.int64()
    data = table.filter(pa.compute.equal(table.column("kind"), 0))
    assert sorted(zip(data.column("time").to_pylist(), data.column("word").to_pylist())) == [(0, "a"), (1, "b")]


def test_product_times_and_arrow_batches(tmp_path):
    w = ParquetEventWriter(tmp_path)
    rb = pa.record_batch({"x": [1, 2, 3]})
    w.push(Messages(Product(2, 5), [rb]))
    w.push(Progress([(Product(0, 0), -1), (Product(3, 0), 1)]))
    w.close()
    events = list(ParquetEventReader(tmp_path))
    assert events[0].time == Product(2, 5) and events[0].data[0].equals(rb)
    assert events[1] == Progress([(Product(0, 0), -1), (Product(3, 0), 1)])
    table = pq.read_table(tmp_path / "worker=0")
    assert table.schema.field("time").type == pa.struct([("outer", pa.int64()), ("inner", pa.int64())])


def test_replay_five_streams_into_three_workers_through_parquet(tmp_path):
    def send(worker):
        writer = ParquetEventWriter(tmp_path, worker.index, worker.peers, flush_seconds=0.0)
        worker.dataflow(lambda s: s.to_stream(range(10)).capture_into(writer))
        while worker.step():
            pass
        writer.close()

    ts.execute(send, threads=5, timeout=30)

    def recv(worker):
        readers = [ParquetEventReader(tmp_path, i) for i in range(5) if i % worker.peers == worker.index]
        got = []
        probe = worker.dataflow(lambda s: replay_into(readers, s).inspect(got.append).probe())
        worker.step_while(lambda: not probe.done(), timeout=30)
        return got

    results = ts.execute(recv, threads=3, timeout=30)
    assert Counter(x for part in results for x in part) == Counter(x for x in range(10) for _ in range(5))


def test_bad_input_names_the_file(tmp_path):
    capture_epochs(tmp_path / "good", [[1, 2]])
    part = sorted((tmp_path / "good" / "worker=0").glob("part-*.parquet"))[0]

    truncated = tmp_path / "truncated" / "worker=0"
    truncated.mkdir(parents=True)
    (truncated / part.name).write_bytes(part.read_bytes()[:-20])
    with pytest.raises(EventLogError, match=part.name):
        list(ParquetEventReader(tmp_path / "truncated"))

    with pytest.raises(EventLogError, match="not an event log"):
        ParquetEventReader(tmp_path / "good" / "worker=0", worker=0)

    foreign = tmp_path / "foreign" / "worker=0"
    foreign.mkdir(parents=True)
    pq.write_table(pa.table({"x": [1]}), foreign / "part-000000.parquet")
    with pytest.raises(EventLogError, match="no timely metadata"):
        list(ParquetEventReader(tmp_path / "foreign"))

    mixed = tmp_path / "mixed" / "worker=0"
    mixed.mkdir(parents=True)
    (mixed / "part-000000.parquet").write_bytes(part.read_bytes())
    capture_epochs(tmp_path / "other", [[{"k": "v"}]])
    other = sorted((tmp_path / "other" / "worker=0").glob("part-*.parquet"))[0]
    (mixed / "part-000001.parquet").write_bytes(other.read_bytes())
    with pytest.raises(EventLogError, match="part-000001.parquet"):
        list(ParquetEventReader(tmp_path / "mixed"))

    with pytest.raises(EventLogError, match="times are"):
        list(ParquetEventReader(tmp_path / "good", time=Product(0, 0)))

    leftover = tmp_path / "good" / "worker=0" / ".part-000099.parquet.tmp"
    leftover.write_bytes(b"half a file")
    assert extract(iter(ParquetEventReader(tmp_path / "good"))) == [(0, [1, 2])]   # ignored

    with pytest.raises(EventLogError, match="already holds an event log"):
        ParquetEventWriter(tmp_path / "good").push(Progress([(0, -1)]))


WRITER = r"""
import sys, time
from timely_spark.capture import ParquetEventWriter, Messages, Progress
w = ParquetEventWriter(sys.argv[1], flush_seconds=0.0)
w.push(Progress([(0, 1)]))     # not a real capture; a steady stream of epochs
epoch = 0
while True:
    w.push(Messages(epoch, [epoch * 10, epoch * 10 + 1]))
    w.push(Progress([(epoch, -1), (epoch + 1, 1)]))
    print(epoch, flush=True)
    epoch += 1
    time.sleep(0.01)
"""


def test_a_killed_writer_leaves_a_readable_log(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    for _ in range(20):
        proc.stdout.readline()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    reader = ParquetEventReader(tmp_path)
    events = list(reader)
    data = extract(events)
    assert len(data) >= 15
    assert all(xs == [t * 10, t * 10 + 1] for t, xs in data)     # whole epochs, nothing torn
    assert reader.next() is None                                   # not closed: maybe more later
