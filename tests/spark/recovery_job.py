"""A stateful job (running sums per key, kept with ``OperatorBuilder.keep_state``) for
the recovery tests: ``python recovery_job.py CHECKPOINT MARKER`` runs it on
local-cluster[2,1,1024] with ``checkpoint=CHECKPOINT, max_attempts=2``; on the first
attempt, once a snapshot is committed (waited for at epoch SNAPSHOT_AT), worker 1's
Python process kills itself with SIGKILL at epoch KILL_AT (MARKER records it).  Prints
one JSON line: the run's result and the same job's result on local threads without a kill or a checkpoint."""

import glob
import json
import os
import sys
import time

import timely_spark as ts

EPOCHS, SNAPSHOT_AT, KILL_AT, KEYS = 12, 3, 7, 8


def running_sums(stream):
    """Per key, the sum of the values of every time so far, emitted when a time completes."""
    b = ts.OperatorBuilder(stream.scope, "RunningSums")
    inp = b.new_input(stream, ts.Exchange(lambda kv: kv[0]))
    out, summed = b.new_output()
    sums, stash = {}, {}                   # key -> sum; time -> [capability, rows]

    def save(t):
        return {"sums": dict(sums), "stash": {s: list(rows) for s, (_, rows) in stash.items() if s < t}}

    initial = b.initial_capability()
    restored = b.keep_state(save)
    if restored is not None:
        sums.update(restored["sums"])
        for s, rows in restored["stash"].items():
            stash[s] = [initial.delayed(s), list(rows)]
    initial.drop()

    def logic():
        for cap, batch in inp:
            stash.setdefault(cap.time, [cap.retain(), []])[1].extend(batch)
        for s in sorted(t for t in stash if not inp.frontier.less_equal(t)):
            cap, rows = stash.pop(s)
            for k, v in rows:
                sums[k] = sums.get(k, 0) + v
            out.session(cap).give_batch(sorted((k, sums[k]) for k in {k for k, _ in rows}))

    b.build(logic, notify=True)
    return summed


def job(checkpoint, marker):
    def work(worker):
        outputs = {}

        def build(scope):
            inp, stream = scope.new_input()
            sums = running_sums(stream)
            sums.inspect_batch(lambda t, data: outputs.setdefault(t, []).extend(data))
            return inp, sums.probe()

        inp, probe = worker.dataflow(build)
        first = worker.restored_time or 0
        for epoch in range(first, EPOCHS):
            if worker.index == 0:
                inp.send_batch([(k, epoch * 100 + k) for k in range(KEYS)])
            inp.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(inp.time), timeout=60)
            if marker is None or os.path.exists(marker):
                continue
            if epoch == SNAPSHOT_AT:              # a snapshot to restore, then a few epochs it lacks
                committed = os.path.join(checkpoint, "manifest-*.json")
                worker.step_while(lambda: not glob.glob(committed), timeout=60)
            if epoch == KILL_AT:
                until = time.monotonic() + 0.3          # let the other worker pass KILL_AT
                worker.step_while(lambda: time.monotonic() < until)
                if worker.index == 1:
                    with open(marker, "w") as f:
                        f.write("killed")
                    os.kill(os.getpid(), 9)
        return {"restored": worker.restored_time,
                "outputs": {str(t): sorted(rows) for t, rows in sorted(outputs.items())}}

    return work


def restored_time(out):
    """Check the job's JSON line ``out``: killed once, finished by the retry, every worker
    restored the same snapshot and made from its time on what the run without a kill
    made; return that snapshot's time."""
    assert out["killed"] and out["attempts"] == 2                  # the kill happened; the retry finished
    restored = {w["restored"] for w in out["got"]}
    assert len(restored) == 1 and None not in restored              # every worker restored the same snapshot
    t = restored.pop()
    for got, want in zip(out["got"], out["want"]):                  # from t on: what the run without a kill made
        assert got["outputs"] == {k: v for k, v in want["outputs"].items() if int(k) >= t}
    return t


if __name__ == "__main__":
    checkpoint, marker = sys.argv[1], sys.argv[2]
    spark = ts.spark.get_session("recovery test", master="local-cluster[2,1,1024]", conf_dir=os.environ["CONF"])
    stats = {}
    got = ts.spark.run(spark, job(checkpoint, marker), workers=2, max_attempts=2, checkpoint=checkpoint,
                       snapshot_every=2, stats=stats, timeout=180, peer_timeout=20)
    spark.stop()
    want = ts.execute(job(None, None), threads=2)
    print(json.dumps({"got": got, "want": want, "attempts": stats["attempts"],
                      "killed": os.path.exists(marker)}))
