"""ts.capture.follow: a live log written by 2 writers, followed by 3 workers while epochs
arrive: exact records per time, each once; the stream's frontier never passes a time
the log has not completed; it ends when the log closes; a half-written (hidden) file is
never read; a damaged file fails naming it; since= starts later.

Real threads, real files; every wait is bounded; no test asserts a timing."""

import threading
import time

import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.capture import Messages, ParquetEventWriter, Progress, follow
from timely_spark.errors import EventLogError

EPOCHS, ROWS = 8, 5


def ids(t, w):
    return [t * 100 + w * 10 + i for i in range(ROWS)]


def caused_by(exc, kind):
    """Whether ``exc`` or an exception it was raised from is a ``kind`` (a worker's
    error reaches execute's caller as WorkerError, from the original)."""
    while exc is not None:
        if isinstance(exc, kind):
            return True
        exc = exc.__cause__
    return False


def write_live(path, started):
    """Two writers; writer 1 lags writer 0 by one epoch, so epoch t is incomplete while
    only writer 0 has finished it.  A hidden half-written file sits in the log meanwhile."""
    writers = [ParquetEventWriter(path, worker=w, peers=2, flush_seconds=0.0) for w in range(2)]
    started.wait(30)
    good = writers[0].dir / "part-000000.parquet"
    for t in range(EPOCHS):
        for w, writer in enumerate(writers):
            writer.push(Messages(t, [pa.record_batch({"id": pa.array(ids(t, w), pa.int64())})]))
            writer.push(Progress([(t, -1), (t + 1, 1)]))
            time.sleep(0.02)
        if t == 2:      # a writer's file on its way in: half of a real part file, under a hidden name
            data = good.read_bytes()
            (writers[0].dir / ".part-000099.parquet.tmp").write_bytes(data[: len(data) // 2])
    for writer in writers:
        writer.push(Progress([(EPOCHS, -1)]))
        writer.close()


def test_two_writers_three_workers_exact_records_per_complete_time(tmp_path):
    path = str(tmp_path / "log")
    started = threading.Event()
    writer = threading.Thread(target=write_live, args=(path, started), daemon=True)
    writer.start()

    def work(worker):
        complete, shares = {}, []

        def at_complete_time(t, batches):      # called once the stream's frontier passed t
            complete[t] = sorted(i for b in batches for i in b.column("id").to_pylist())
            return None

        def build(scope):
            stream = follow(path, scope, poll=0.02)
            stream.inspect_batch(lambda t, batches: shares.append(sum(b.num_rows for b in batches)))
            stream.exchange(lambda b: 0).per_time(at_complete_time)

        worker.dataflow(build)
        started.set()
        return complete, shares

    results = ts.execute(work, threads=3, timeout=60)
    writer.join(30)
    complete = results[0][0]
    assert complete == {t: sorted(ids(t, 0) + ids(t, 1)) for t in range(EPOCHS)}
    per_time = 2 * ROWS                      # each time's rows, cut into 3 contiguous shares: 3, 3, 4
    assert [sum(s) for _, s in results] == [EPOCHS * (per_time * (w + 1) // 3 - per_time * w // 3) for w in range(3)]


def test_since_starts_later_and_a_damaged_file_fails_naming_it(tmp_path):
    path = str(tmp_path / "log")
    w = ParquetEventWriter(path, flush_seconds=0.0)
    for t in range(4):
        w.push(Messages(t, [{"n": t}]))
        w.push(Progress([(t, -1), (t + 1, 1)]))
    w.push(Progress([(4, -1)]))
    w.close()

    def later(worker):
        seen = []
        worker.dataflow(lambda s: follow(path, s, since=2).inspect_time(lambda t, r: seen.append((t, r["n"]))))
        return seen

    assert ts.execute(later, timeout=30) == [[(2, 2), (3, 3)]]

    (tmp_path / "log" / "worker=0" / "part-000004.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(Exception, match="part-000004.parquet") as failure:
        ts.execute(lambda worker: worker.dataflow(lambda s: follow(path, s)), timeout=30)
    assert caused_by(failure.value, EventLogError)


def test_a_log_closed_with_times_incomplete_fails_instead_of_waiting(tmp_path):
    path = str(tmp_path / "log")
    w = ParquetEventWriter(path, flush_seconds=0.0)
    w.push(Messages(0, [{"n": 0}]))
    w.push(Progress([(0, -1), (1, 1)]))
    w.close()                                   # time 1 never completed
    with pytest.raises(Exception, match="never completed") as failure:
        ts.execute(lambda worker: worker.dataflow(lambda s: follow(path, s, poll=0.01)), timeout=30)
    assert caused_by(failure.value, EventLogError)
