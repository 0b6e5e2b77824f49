"""A worker process of ``ts.execute(processes=2)`` SIGKILLed at each step of the run's
start (before its start message, before its address is read, before the addresses are
sent to it, just after) reaches the caller as a WorkerFailure naming the process --
never a raw BrokenPipeError or EOFError.  The kill is placed deterministically: the
test wraps the starting process's own steps and kills the child (and waits for it to be
gone) right before the chosen step."""

from __future__ import annotations

import os
import signal

import pytest

import timely_spark as ts
from timely_spark import launch

STEPS = ["before its start", "before its address is read", "before the addresses are sent", "after the start"]


def kill(child):
    os.kill(child.proc.pid, signal.SIGKILL)
    child.proc.wait(timeout=30)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("victim", [0, 1])
@pytest.mark.parametrize("step", STEPS)
def test_a_worker_process_killed_during_start_up_is_a_worker_failure_naming_it(monkeypatch, step, victim):
    children = []
    sends: dict[int, int] = {}
    new_child, send, read = launch.ChildProcess.__init__, launch.ChildProcess.send, launch.read_message

    def spawned(self, index):
        new_child(self, index)
        children.append(self)

    def sending(self, obj):
        sends[self.index] = sends.get(self.index, 0) + 1
        if self.index == victim and (step, sends[self.index]) in (("before its start", 1),
                                                                  ("before the addresses are sent", 2)):
            kill(self)
        send(self, obj)
        if self.index == victim and (step, sends[self.index]) == ("after the start", 2):
            kill(self)

    def reading(fd, deadline):
        child = next((c for c in children if c.fd == fd), None)
        if child is not None and child.index == victim and step == "before its address is read" \
                and child.proc.poll() is None:
            kill(child)
        return read(fd, deadline)

    monkeypatch.setattr(launch.ChildProcess, "__init__", spawned)
    monkeypatch.setattr(launch.ChildProcess, "send", sending)
    monkeypatch.setattr(launch, "read_message", reading)
    with pytest.raises(ts.WorkerFailure) as e:
        ts.execute(lambda worker: worker.index, processes=2, timeout=60)
    assert f"process {victim}" in str(e.value), e.value
    assert all(c.proc.poll() is not None for c in children)          # no child left behind
