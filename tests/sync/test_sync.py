"""Barrier and Sequencer with threads and processes (real sockets for processes)."""

import time

import pytest

import timely_spark as ts

LAYOUTS = [dict(threads=3), dict(processes=2), dict(processes=2, threads=2)]


def barrier_rounds(worker, rounds=4):
    """Enter and leave times of each round, with sleeps skewed by worker index."""
    barrier = ts.sync.Barrier(worker)
    log = []
    for k in range(rounds):
        time.sleep(0.01 * ((worker.index + k) % worker.peers))
        entered = time.monotonic()
        barrier.wait(timeout=30)
        log.append((k, entered, time.monotonic()))
    return log


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_no_worker_leaves_a_round_before_all_have_entered_it(layout):
    logs = ts.execute(barrier_rounds, **layout, timeout=30)
    rounds = len(logs[0])
    for k in range(rounds):
        last_in = max(log[k][1] for log in logs)
        first_out = min(log[k][2] for log in logs)
        assert first_out >= last_in, f"round {k}: a worker left before every worker entered"


def test_barrier_keeps_other_dataflows_running():
    def work(worker):
        ticks = []

        def build(scope):
            def loop(inner):
                handle, cycle = inner.feedback(1)
                x = scope.to_stream([0] if scope.index == 0 else []).enter(inner).concat(cycle)
                x.inspect(lambda v: ticks.append(time.monotonic()))
                x.filter(lambda v: v < 300).map(lambda v: v + 1).connect_loop(handle)
                return x.leave()

            scope.iterative(loop)

        worker.dataflow(build)
        barrier = ts.sync.Barrier(worker)
        if worker.index == 1:
            time.sleep(0.5)                 # worker 0 waits at the barrier meanwhile
        entered = time.monotonic()
        barrier.wait(timeout=30)
        return entered, time.monotonic(), ticks

    (in0, out0, ticks), _ = ts.execute(work, threads=2, timeout=30)
    during = [t for t in ticks if in0 <= t <= out0]
    assert len(during) > 100          # the loop ran while worker 0 waited


def sequence(worker):
    """Worker i pushes 5 + 3*i elements, at its own pace; returns what it observed."""
    seq = ts.sync.Sequencer(worker)
    mine = [(worker.index, k) for k in range(5 + 3 * worker.index)]
    total = sum(5 + 3 * i for i in range(worker.peers))
    seen = []
    for element in mine:
        seq.push(element)
        for _ in range(worker.index + 1):
            worker.step()
        seen.extend(seq)
    while len(seen) < total:
        seen.append(seq.wait_next(timeout=30))
    seq.close()
    return seen


@pytest.mark.parametrize("layout", [dict(threads=3), dict(processes=3)], ids=str)
def test_sequencer_gives_every_worker_the_same_order(layout):
    results = ts.execute(sequence, **layout, timeout=30)
    peers = len(results)
    expected = sorted((i, k) for i in range(peers) for k in range(5 + 3 * i))
    assert all(r == results[0] for r in results)          # identical order everywhere
    assert sorted(results[0]) == expected                 # each element exactly once
    for i in range(peers):                                # each worker's pushes keep their order
        assert [e for e in results[0] if e[0] == i] == [(i, k) for k in range(5 + 3 * i)]


def test_sequencer_with_a_timer_and_close():
    def work(worker):
        seq = ts.sync.Sequencer(worker, timer=worker.timer)
        seq.push(worker.index)
        got = [seq.wait_next(timeout=30), seq.wait_next(timeout=30)]
        seq.close()
        with pytest.raises(ValueError, match="closed"):
            seq.push(1)
        return got

    a, b = ts.execute(work, threads=2, timeout=30)
    assert a == b and sorted(a) == [0, 1]


def test_an_unclosed_sequencer_does_not_hang_the_end_of_a_run():
    def work(worker):
        seq = ts.sync.Sequencer(worker)
        seq.push(worker.index)
        return "left open"

    assert ts.execute(work, threads=2, timeout=30) == ["left open"] * 2
