"""follow on a restored run and under a snapshot's pin."""

import time

import timely_spark as ts
from timely_spark.capture import Messages, ParquetEventWriter, Progress, follow


def closed_log(path, epochs=5):
    w = ParquetEventWriter(path, flush_seconds=0.0)
    for e in range(epochs):
        w.push(Messages(e, [{"e": e}]))
        w.push(Progress([(e, -1), (e + 1, 1)]))
    w.push(Progress([(epochs, -1)]))
    w.close()


def test_a_pinned_follower_holds_its_stream_at_the_pin(tmp_path):
    closed_log(tmp_path / "log")

    def work(worker):
        seen = []
        probe = worker.dataflow(lambda s: follow(str(tmp_path / "log"), s, poll=0.01)
                                .inspect_time(lambda t, r: seen.append(t)).probe())
        [source] = worker.sources()             # follow registered its follower
        source.pin(2)
        deadline = time.monotonic() + 60
        while not source.closed and time.monotonic() < deadline:
            worker.step()
        for _ in range(20):
            worker.step()
        held = probe.frontier.elements()
        source.unpin()
        worker.step_while(lambda: not probe.done(), timeout=60)
        return held, sorted(seen), source.resume_time

    [(held, seen, resume)] = ts.execute(work, timeout=120)
    assert held == [2]                          # everything was sent, but the pin holds time 2
    assert seen == [0, 1, 2, 3, 4] and resume == 5


def test_follow_on_a_restored_run_starts_at_the_restored_time(tmp_path):
    closed_log(tmp_path / "log")

    def work(worker):
        worker.restored_time = 3                # as a restore from a snapshot at time 3 sets it
        seen = []
        probe = worker.dataflow(lambda s: follow(str(tmp_path / "log"), s, poll=0.01)
                                .inspect_time(lambda t, r: seen.append((t, r["e"]))).probe())
        worker.step_while(lambda: not probe.done(), timeout=60)
        return seen

    assert ts.execute(work, timeout=120) == [[(3, 3), (4, 4)]]
