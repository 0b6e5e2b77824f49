"""The engine across processes joined by the TCP mesh: same results as threads."""

import pytest

import timely_spark as ts
from timely_spark.testing import collect, collect_per_worker, feed_epochs

from ..dataflow.helpers import collatz_dataflow, collatz_steps

LAYOUTS = [(2, 1), (3, 1), (2, 2)]   # (processes, threads)


@pytest.mark.parametrize("processes,threads", LAYOUTS)
def test_exchange_matches_threads(processes, threads):
    def build(s):
        return s.to_stream(range(40) if s.index == 0 else []).exchange(lambda x: x).map(lambda x: (x, s.index))

    peers = processes * threads
    out = collect(build, threads=threads, processes=processes)
    assert sorted(out) == [(0, (x, x % peers)) for x in range(40)]
    assert out == collect(build, threads=peers)


@pytest.mark.parametrize("processes,threads", LAYOUTS)
def test_broadcast_matches_threads(processes, threads):
    def build(s):
        return s.to_stream([s.index]).broadcast()

    peers = processes * threads
    assert collect_per_worker(build, threads, processes) == [list(range(peers))] * peers


@pytest.mark.parametrize("processes,threads", [(2, 1), (3, 1)])
def test_loop_with_exchange_across_processes(processes, threads):
    out = collect(lambda scope: collatz_dataflow(scope, range(1, 201)), threads=threads, processes=processes)
    assert sorted(x for _, x in out) == [(n, collatz_steps(n)) for n in range(1, 201)]


@pytest.mark.parametrize("processes,threads", [(2, 1), (2, 2)])
def test_probes_and_aggregation_across_epochs(processes, threads):
    data = [[1, 2, 3, 4], [5], [], [6, 7, 8]]

    def build(scope, stream):
        return (stream.map(lambda x: (x % 2, x))
                .aggregate(lambda k, v, acc: (acc or 0) + v, lambda k, acc: (k, acc)))

    def work(worker):
        return feed_epochs(worker, build, data)

    seen = sorted(p for part in ts.execute(work, threads=threads, processes=processes, timeout=60) for p in part)
    assert seen == [(0, (0, 6)), (0, (1, 4)), (1, (1, 5)), (3, (0, 14)), (3, (1, 7))]


def test_worker_indices_across_processes():
    assert ts.execute(lambda w: (w.index, w.peers), threads=2, processes=2, timeout=60) == \
        [(0, 4), (1, 4), (2, 4), (3, 4)]


def test_arrow_record_batches_cross_the_mesh():
    import pyarrow as pa

    def work(worker):
        got = []

        def build(s):
            batches = [pa.record_batch({"k": [i] * 3, "v": [1.5, 2.5, 3.5]}) for i in range(4)] if s.index == 0 else []
            s.to_stream(batches).exchange(lambda rb: rb.column(0)[0].as_py()).inspect(got.append)

        worker.dataflow(build)
        return got

    results = ts.execute(work, processes=2, timeout=60)
    assert [sorted(rb.column(0)[0].as_py() for rb in part) for part in results] == [[0, 2], [1, 3]]
    assert all(isinstance(rb, pa.RecordBatch) and rb.num_rows == 3 for part in results for rb in part)
