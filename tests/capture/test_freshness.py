"""A completed time is readable from a Parquet event log within the writer's flush delay,
even when the stream then goes idle."""

import time

import timely_spark as ts
from timely_spark.capture import ParquetEventReader, ParquetEventWriter
from timely_spark.capture.event import Progress
from timely_spark.progress import MutableAntichain


def complete_in_log(path) -> bool:
    """Whether the log's own progress shows epoch 0 complete."""
    frontier = MutableAntichain([(0, 1)])
    for event in ParquetEventReader(path):
        if isinstance(event, Progress):
            frontier.update_iter(event.updates)
    return not frontier.less_equal(0)


def test_an_epoch_completed_then_idle_is_readable_within_two_seconds(tmp_path):
    def work(worker):
        writer = ParquetEventWriter(tmp_path, flush_seconds=1.0)
        index = worker.next_dataflow_index()
        inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.capture_into(writer) or st.probe()))(
            *s.new_input()))
        inp.send_batch([{"x": 1}, {"x": 2}])
        inp.advance_to(1)                        # epoch 0 is complete; nothing more comes for a while
        worker.step_while(lambda: probe.less_than(1), timeout=10)
        done = time.monotonic()
        seen = None
        while time.monotonic() < done + 5:
            worker.step()                        # the worker idles (parks) between steps
            if complete_in_log(tmp_path):
                seen = time.monotonic() - done
                break
        worker.drop_dataflow(index)
        return seen

    (seen,) = ts.execute(work, timeout=30)
    assert seen is not None and seen < 2.0, f"epoch 0 was not readable within 2 s (after {seen} s)"
