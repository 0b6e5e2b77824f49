"""A captured stream that ends closes its writer, on every way of running: the log's
tail is written and the log is closed, without the worker function closing it."""

import pytest

import timely_spark as ts
from timely_spark.capture import ParquetEventReader, ParquetEventWriter, extract
from timely_spark.capture.follow import follow


def capture_without_closing(path, epochs=40):
    def work(worker):
        writer = ParquetEventWriter(path, worker=worker.index, peers=worker.peers, flush_seconds=60.0)

        def build(scope):
            inp, stream = scope.new_input()
            stream.capture_into(writer)
            return inp
        inp = worker.dataflow(build)
        for epoch in range(epochs):
            inp.send(epoch * worker.peers + worker.index)
            inp.advance_to(epoch + 1)
        return None                      # the writer is not closed here
    return work


@pytest.mark.parametrize("layout", [{"threads": 4}, {"processes": 2}], ids=["threads", "processes"])
def test_a_captured_stream_that_ends_closes_its_log(tmp_path, layout):
    path = str(tmp_path / "log")
    ts.execute(capture_without_closing(path), timeout=120, **layout)
    peers = layout.get("threads", 1) * layout.get("processes", 1)
    for w in range(peers):
        assert (tmp_path / "log" / f"worker={w}" / "_CLOSED").exists()
        got = extract(iter(ParquetEventReader(path, worker=w)))
        assert [t for t, _ in got] == list(range(40))        # every epoch written, none left in a buffer

    def read(worker):
        seen = []
        worker.dataflow(lambda s: follow(path, s, poll=0.01).inspect(seen.append))
        return seen
    [seen] = ts.execute(read, timeout=60)                    # ends: the log is closed
    assert sorted(seen) == list(range(40 * peers))
