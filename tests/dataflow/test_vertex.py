"""Naiad's vertex model: the Select and Count vertices of the Naiad introduction."""

import pytest

import timely_spark as ts
from timely_spark import CapabilityError, WorkerError
from timely_spark.testing import collect, feed_epochs


class SelectVertex(ts.Vertex):
    def __init__(self, selector):
        self.selector = selector

    def on_recv(self, input, records, time):
        self.send_by(self.output, [self.selector(m) for m in records], time)


class CountVertex(ts.Vertex):
    def __init__(self):
        self.counts = {}

    def on_recv(self, input, records, time):
        if time not in self.counts:
            self.counts[time] = len(records)
            self.notify_at(time)
        else:
            self.counts[time] += len(records)

    def on_notify(self, time):
        self.send_by(self.output, [self.counts.pop(time)], time)


@pytest.mark.parametrize("threads", [1, 2])
def test_select_then_count_per_epoch(threads):
    def build(scope, stream):
        return stream.vertex(SelectVertex(lambda x: x * 2)).exchange(lambda x: 0).vertex(CountVertex())

    def work(worker):
        return feed_epochs(worker, build, [[1, 2, 3], [4], [], [5, 6]])

    seen = sorted(p for part in ts.execute(work, threads=threads, timeout=30) for p in part)
    assert seen == [(0, 3), (1, 1), (3, 2)]


def test_vertex_with_two_inputs_and_later_times():
    class Merge(ts.Vertex):
        def on_recv(self, input, records, time):
            self.send_by(self.output, [(input, r) for r in records], time + 1)   # later is allowed

    out = collect(lambda s: s.to_stream(["a"]).vertex(Merge(), s.to_stream(["b"])))
    assert out == [(1, (0, "a")), (1, (1, "b"))]


def test_vertex_cannot_go_backwards():
    class Backwards(ts.Vertex):
        def on_recv(self, input, records, time):
            self.send_by(self.output, records, time - 1)

    def build(s):
        inp, stream = s.new_input()
        inp.advance_to(2)
        inp.send(1)
        inp.close()
        return stream.vertex(Backwards())

    with pytest.raises(WorkerError) as err:
        collect(build)
    assert isinstance(err.value.cause, CapabilityError)
    assert "vertex 'Backwards'" in str(err.value.cause) and "backwards in time" in str(err.value.cause)
