"""The driver's rendezvous acts on nothing it cannot authenticate: a task (or anything
else on the network) that knows a job's token but not its secret cannot register for
the job nor report a failure for it -- and the job still meets for the tasks that can.

The impostor is the package's own task-side client run in another process, taught to
accept whatever the driver proves (it cannot check, not knowing the secret) and given
a wrong secret: so it sends exactly what a task sends, with MACs the driver must
refuse.  The same client with the right secret is accepted (the control)."""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import timely_spark as ts
from timely_spark.spark.rendezvous import driver_rendezvous, meet

ROOT = Path(__file__).resolve().parents[2]

IMPOSTOR = """
import hmac, json, sys
from timely_spark.spark import rendezvous

hmac.compare_digest = lambda a, b: True   # takes any proof from the driver: it cannot check one
args = json.loads(sys.argv[1])
out = {}
for name, (secret, stage, index, workers) in args["tries"].items():
    ticket = rendezvous.Ticket("127.0.0.1", args["port"], bytes.fromhex(args["token"]), bytes.fromhex(secret), 10.0,
                               args["job"])
    try:
        addresses, _ = rendezvous.meet(ticket, stage, 100 + index, index, workers, "203.0.113.9", 6666)
        out[name] = [list(a) for a in addresses]
    except Exception as exc:
        out[name] = f"{type(exc).__name__}: {exc}"
    rendezvous.report_failure(ticket, stage, 100 + index, RuntimeError(f"reported by {name}"))
print(json.dumps(out))
"""


def impostor(service, ticket, tries):
    """Run the task-side client in another process: ``tries`` maps a name to (secret,
    stage, index, workers); returns what each registration got (addresses or the error)."""
    args = json.dumps({"port": service.port, "token": ticket.token.hex(), "job": ticket.job,
                       "tries": {name: [secret.hex(), *rest] for name, (secret, *rest) in tries.items()}})
    done = subprocess.run([sys.executable, "-c", IMPOSTOR, args], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_task_that_cannot_prove_the_secret_neither_registers_nor_reports(spark):
    service = driver_rendezvous("127.0.0.1")
    secret = os.urandom(32)
    ticket = service.open(secret, wait=30)
    # the control: the same client with the job's secret is heard (registers, and its report is kept)
    heard = impostor(service, ticket, {"with the secret": (secret, 7, 0, 1)})
    assert heard == {"with the secret": [["203.0.113.9", 6666]]}
    claimed = service.claim(ticket.job, 7, 100)
    assert len(claimed) == 1 and "reported by with the secret" in str(claimed[0])

    # task 0 of a two-task stage waits for task 1; the impostor claims to be task 1
    got = {}
    waiting = threading.Thread(target=lambda: got.update(
        task0=_outcome(lambda: meet(ticket, 1, 100, 0, 2, "127.0.0.1", 5000)[0])))
    waiting.start()
    refused = impostor(service, ticket, {"with a wrong secret": (os.urandom(32), 1, 1, 2)})
    assert "203.0.113.9" not in json.dumps(refused), f"the driver answered an impostor: {refused}"
    assert "did not prove" not in json.dumps(refused), f"the impostor never sent its request: {refused}"
    assert service.claim(ticket.job, 1, 101) == [], "the driver kept a failure reported without the job's secret"
    service.close(ticket)                       # ends task 0's wait: its peer never came
    waiting.join(30)
    assert not waiting.is_alive()
    assert "203.0.113.9" not in str(got["task0"]), f"task 0 was told to meet the impostor: {got['task0']}"
    assert "missing: [1]" in str(got["task0"])

    # the tasks that know the secret still meet, and a real job runs
    ticket = service.open(secret, wait=30)
    results = {}

    def register(i):
        results[i] = meet(ticket, 2, 200 + i, i, 2, "127.0.0.1", 5000 + i)[0]

    tasks = [threading.Thread(target=register, args=(i,)) for i in range(2)]
    for t in tasks:
        t.start()
    for t in tasks:
        t.join(30)
    assert results == {i: [("127.0.0.1", 5000), ("127.0.0.1", 5001)] for i in range(2)}
    service.close(ticket)
    stats: dict = {}
    assert ts.spark.run(spark, lambda w: w.index, workers=2, timeout=60, stats=stats) == [0, 1]
    assert [t["met_through"] for t in stats["tasks"]] == ["driver", "driver"]


def _outcome(call):
    try:
        return call()
    except Exception as exc:
        return exc
