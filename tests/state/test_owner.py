"""A checkpoint directory and an output log's worker directory belong to one run at a
time: a second run is refused at start, naming the directory and the run holding it; a
run that ended (or was killed) holds nothing."""

import os
import signal
import subprocess
import sys
import threading

import pytest

import timely_spark as ts
from timely_spark.capture import ParquetEventWriter
from timely_spark.errors import CheckpointError, EventLogError

from .helpers import counting


def test_a_second_run_on_a_checkpoint_in_use_is_refused(tmp_path):
    checkpoint = str(tmp_path)
    started, finish = threading.Event(), threading.Event()

    def slow(worker):
        started.set()
        finish.wait(60)
        return counting(stop_after=2)(worker)

    first = threading.Thread(target=lambda: ts.execute(slow, checkpoint=checkpoint, timeout=120))
    first.start()
    try:
        assert started.wait(60)
        with pytest.raises(CheckpointError) as e:
            ts.execute(counting(), checkpoint=checkpoint)
        message = str(e.value)
        assert message.startswith(f"{checkpoint}: the checkpoint directory is in use by run ")
        assert f"process {os.getpid()}" in message
    finally:
        finish.set()
        first.join(120)
    resumed = ts.execute(counting(), checkpoint=checkpoint, threads=2)     # the first ended: free again
    assert [r for r, _ in resumed] == [2, 2]


HOLD = """
import sys, time, timely_spark as ts
def work(worker):
    print("holding", flush=True)
    time.sleep(120)
ts.execute(work, checkpoint=sys.argv[1])
"""


@pytest.mark.timeout(120)
def test_a_killed_owner_holds_nothing(tmp_path):
    checkpoint = str(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, checkpoint], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(CheckpointError, match=f"in use by run .* \\(process {holder.pid} on host "):
            ts.execute(counting(), checkpoint=checkpoint)
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)
        holder.stdout.close()
    assert ts.execute(counting(stop_after=1), checkpoint=checkpoint)      # at once: no lease to wait out


def test_a_second_writer_of_a_log_is_refused_until_the_first_closes(tmp_path):
    first = ParquetEventWriter(tmp_path, worker=0, peers=2)
    with pytest.raises(EventLogError) as e:
        ParquetEventWriter(tmp_path, worker=0, peers=2)
    assert str(e.value).startswith(f"{tmp_path / 'worker=0'}: worker 0's directory of the event log is in use by run")
    ParquetEventWriter(tmp_path, worker=1, peers=2).close()                # another worker's directory: free
    first.close()
    again = ParquetEventWriter(tmp_path, worker=0, peers=2)                # free (the log itself is complete:
    with pytest.raises(EventLogError, match="already holds an event log"):  # it is not written again)
        again.push(ts.capture.Progress([(0, -1)]))
