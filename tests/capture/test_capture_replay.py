"""Capture and replay in one process: round trips, and n streams into m workers."""

from collections import Counter

import pytest

import timely_spark as ts
from timely_spark.capture import EventQueue, Messages, Progress, extract, replay_into

DATA = {0: [1, 2, 3], 1: [4], 3: [5, 6], 4: []}


def feed(worker, inp):
    for t in sorted(DATA):
        inp.advance_to(t)
        inp.send_batch([(worker.index, x) for x in DATA[t]])
    inp.close()


def test_capture_then_extract_is_the_input_per_time():
    (queue,) = capture_with(1)
    assert extract(queue) == [(t, [(0, x) for x in xs]) for t, xs in sorted(DATA.items()) if xs]
    # the frontier story: minus the initial capability at 0, and in the end nothing left
    updates = Counter()
    for event in queue:
        if isinstance(event, Progress):
            for t, d in event.updates:
                updates[t] += d
    assert sum(updates.values()) == -1
    assert isinstance(list(queue)[-1], Progress)      # the final frontier change is captured


def test_a_sink_sees_the_final_frontier_before_its_dataflow_completes():
    frontiers = []
    ts.example(lambda s: s.to_stream([1]).sink(None, "Watch", lambda inp: (inp.take(),
                                                                           frontiers.append(inp.frontier.elements()))))
    assert frontiers[-1] == []


def capture_with(workers):
    def work(worker):
        queue = EventQueue()

        def build(scope):
            inp, stream = scope.new_input()
            stream.capture_into(queue)
            return inp

        feed(worker, worker.dataflow(build))
        return queue

    return ts.execute(work, threads=workers, timeout=30)


@pytest.mark.parametrize("sources", [1, 2, 5])
@pytest.mark.parametrize("replayers", [1, 2, 3])
def test_replay_n_streams_into_m_workers(sources, replayers):
    queues = capture_with(sources)
    expected = Counter((t, (i, x)) for i in range(sources) for t, xs in DATA.items() for x in xs)

    def work(worker):
        mine = [q for i, q in enumerate(queues) if i % worker.peers == worker.index]
        seen = []

        def build(scope):
            stream = replay_into(mine, scope)
            return stream.inspect_time(lambda t, x: seen.append((t, x))).probe()

        probe = worker.dataflow(build)
        try:
            worker.step_while(lambda: not probe.done(), timeout=5)
        except TimeoutError:
            raise AssertionError(f"the replay of {len(mine)} finished stream(s) did not complete within 5 s "
                                 f"(frontier {probe.frontier.elements()})") from None
        return seen

    results = ts.execute(work, threads=replayers, timeout=10)
    assert Counter(p for part in results for p in part) == expected


def test_replay_of_an_unfinished_stream_stays_open():
    events = [Messages(0, ["a"]), Progress([(0, -1), (1, 1)])]   # frontier moved to 1, not closed

    def work(worker):
        def build(scope):
            return replay_into([events], scope).probe()

        index = worker.next_dataflow_index()
        probe = worker.dataflow(build)
        worker.step_while(lambda: probe.less_than(1), timeout=10)
        frontier = probe.frontier.elements()
        worker.drop_dataflow(index)   # it will never finish: abandon it for the test
        return frontier

    assert ts.execute(work, timeout=30) == [[1]]


def test_replay_rejects_what_is_not_an_event():
    with pytest.raises(ts.WorkerError, match="not an event"):
        ts.example(lambda s: replay_into([["nope"]], s))


def test_a_source_that_has_not_spoken_yet_holds_the_replayed_frontier():
    """Replay starts with one capability per source: two finished sources must not let
    time 0 pass while a third has not reported anything yet."""
    done_a = [Messages(0, ["a"]), Progress([(0, -1)])]
    done_b = [Messages(0, ["b"]), Progress([(0, -1)])]
    late = EventQueue()                                   # says nothing at first

    def work(worker):
        seen = []
        index = worker.next_dataflow_index()
        probe = worker.dataflow(lambda s: replay_into([done_a, done_b, late], s).inspect(seen.append).probe())
        worker.step_while(lambda: len(seen) < 2, timeout=10)
        for _ in range(20):
            worker.step()
        held = probe.less_equal(0)                        # time 0 may still get data from `late`
        late.push(Messages(0, ["c"]))
        late.push(Progress([(0, -1)]))
        late.close()
        worker.step_while(lambda: not probe.done(), timeout=10)
        worker.drop_dataflow(index)
        return held, sorted(seen)

    assert ts.execute(work, timeout=30) == [(True, ["a", "b", "c"])]
