"""Several workers as threads: routing, broadcast, global aggregates, probes across epochs."""

import pytest

import timely_spark as ts
from timely_spark.testing import collect, collect_per_worker, feed_epochs


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_exchange_routes_each_record_to_its_worker(threads):
    def work(worker):
        got = []
        worker.dataflow(lambda s: s.to_stream(range(30) if s.index == 0 else [])
                        .exchange(lambda x: x).inspect(got.append))
        return got

    results = ts.execute(work, threads=threads, timeout=30)
    for index, got in enumerate(results):
        assert sorted(got) == [x for x in range(30) if x % threads == index]


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_broadcast_gives_every_worker_everything(threads):
    got = collect_per_worker(lambda s: s.to_stream([s.index * 10, s.index * 10 + 1]).broadcast(), threads)
    everything = sorted(x for i in range(threads) for x in (i * 10, i * 10 + 1))
    assert got == [everything] * threads


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_distinct_count_across_workers(threads):
    """Each worker reads a slice with duplicates; distinct values per epoch are
    counted once globally (exchange by value, dedupe per worker, sum the counts)."""
    data = [[i % 7 for i in range(40)], [i % 11 for i in range(40)], []]

    def build(scope, stream):
        distinct = (stream.exchange(lambda x: x)
                    .accumulate(set(), lambda acc, batch: acc | set(batch))
                    .map(lambda s: ("n", len(s))))
        return distinct.aggregate(lambda k, v, acc: (acc or 0) + v, lambda k, acc: acc)

    def work(worker):
        return feed_epochs(worker, build, data)

    seen = [pair for part in ts.execute(work, threads=threads, timeout=30) for pair in part]
    assert sorted(seen) == [(0, 7), (1, 11)]


@pytest.mark.parametrize("threads", [1, 3])
def test_probe_tracks_epochs_in_order(threads):
    def build(scope, stream):
        return stream.exchange(lambda x: x).map(lambda x: x + 1)

    def work(worker):
        return feed_epochs(worker, build, [[1, 2], [3], [], [4, 5, 6]])

    seen = sorted(pair for part in ts.execute(work, threads=threads, timeout=30) for pair in part)
    assert seen == [(0, 2), (0, 3), (1, 4), (3, 5), (3, 6), (3, 7)]


def test_probe_frontier_does_not_pass_an_open_epoch():
    def work(worker):
        def build(s):
            inp, stream = s.new_input()
            return inp, stream.probe()

        inp, probe = worker.dataflow(build)
        frontiers = []
        for epoch in range(3):
            inp.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(inp.time), timeout=10)
            frontiers.append(probe.frontier.elements())
            # without the input's consent the frontier cannot move further
            for _ in range(3):
                worker.step()
            assert not probe.less_equal(epoch) and probe.less_equal(epoch + 1)
        inp.close()
        worker.step_while(lambda: not probe.done(), timeout=10)
        return frontiers

    assert ts.execute(work, threads=2, timeout=30) == [[[1], [2], [3]]] * 2


def test_several_dataflows_per_worker():
    def work(worker):
        a, b = [], []
        worker.dataflow(lambda s: s.to_stream([1, 2]).inspect(a.append))
        inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.inspect(b.append).probe()))(*s.new_input()))
        inp.send(worker.index)
        inp.close()
        worker.step_while(lambda: not probe.done(), timeout=10)
        while worker.step():
            pass
        return a, b

    assert ts.execute(work, threads=2, timeout=30) == [([1, 2], [0]), ([1, 2], [1])]


def test_worker_index_and_peers():
    assert ts.execute(lambda w: (w.index, w.peers), threads=3, timeout=30) == [(0, 3), (1, 3), (2, 3)]
    assert collect(lambda s: s.to_stream([s.index]), threads=3) == [(0, 0), (0, 1), (0, 2)]


@pytest.mark.parametrize("threads", [2, 3])
def test_a_time_completes_only_once_every_workers_records_of_it_arrived(threads):
    """Progress crosses workers: each worker's probe passes an epoch only after the
    records every other worker sent it at that epoch have arrived -- and it does pass."""
    epochs = 3

    def work(worker):
        got = []
        inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.exchange(lambda x: x)
                                                                .inspect_time(lambda t, x: got.append((t, x)))
                                                                .probe()))(*s.new_input()))
        at_completion = []
        for epoch in range(epochs):
            inp.send_batch([1000 * worker.index + 10 * epoch + k for k in range(threads * 2)])
            inp.advance_to(epoch + 1)
            try:
                worker.step_while(lambda: probe.less_equal(epoch), timeout=5)
            except TimeoutError:
                raise AssertionError(f"epoch {epoch} did not complete within 5 s: the other workers' progress "
                                     "did not arrive") from None
            at_completion.append(sorted(x for t, x in got if t == epoch))
        inp.close()
        worker.step_while(lambda: not probe.done(), timeout=10)
        return at_completion

    results = ts.execute(work, threads=threads, timeout=30)
    for w, per_epoch in enumerate(results):
        expect = [sorted(x for sender in range(threads) for x in range(1000 * sender + 10 * e,
                                                                        1000 * sender + 10 * e + threads * 2)
                         if x % threads == w) for e in range(epochs)]
        assert per_epoch == expect, f"worker {w}: what had arrived when each epoch completed"


def test_a_probe_sees_the_progress_of_its_own_step():
    """A worker's own progress moves its probe in the step that made it (the probe it
    activated runs in the same run of the scope), not one step later: on one worker,
    one step per epoch of a pipeline suffices, and the counts stay exact."""
    def work(worker):
        seen = []

        def build(scope):
            inp, stream = scope.new_input()
            return inp, stream.map(lambda x: x + 1).inspect(seen.append).probe()

        inp, probe = worker.dataflow(build)
        worker.step()
        steps = []
        for epoch in range(5):
            inp.send(epoch)
            inp.advance_to(epoch + 1)
            n = 0
            while probe.less_than(epoch + 1):
                worker.step()
                n += 1
            steps.append(n)
        return steps, seen

    assert ts.execute(work, timeout=30) == [([1] * 5, [1, 2, 3, 4, 5])]


@pytest.mark.parametrize("threads", [1, 2])
def test_a_step_flushes_what_an_input_buffered(threads):
    """A record sent without advancing reaches the operators within a few steps (the input
    names itself for the next step to flush)."""
    def work(worker):
        seen = []
        inp, _ = worker.dataflow(lambda s: (lambda i, st: (i, st.inspect(seen.append)))(*s.new_input()))
        inp.send(worker.index)
        for _ in range(20):
            if seen:
                break
            worker.step()
        return list(seen)            # (a copy: the worker's end flushes the input and runs it)

    assert ts.execute(work, threads=threads, timeout=30) == [[i] for i in range(threads)]


@pytest.mark.parametrize("threads", [2, 3])
def test_a_batch_of_one_record_goes_to_its_worker(threads):
    """An exchange routes a batch of one record (the common small epoch) by its key, as any other."""
    def work(worker):
        got = []
        inp, probe = worker.dataflow(
            lambda s: (lambda i, st: (i, st.exchange(lambda x: x).inspect(got.append).probe()))(*s.new_input()))
        for epoch in range(6):
            inp.send(epoch * threads + (worker.index + epoch) % threads)
            inp.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(epoch + 1), timeout=10)
        return sorted(got)

    sent = [e * threads + (w + e) % threads for w in range(threads) for e in range(6)]
    assert ts.execute(work, threads=threads, timeout=30) == [
        sorted(x for x in sent if x % threads == i) for i in range(threads)]
