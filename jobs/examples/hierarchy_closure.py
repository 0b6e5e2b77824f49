"""The transitive closure of a hierarchy (who reports to whom, at any depth), kept current
as people move (``iterate``): each epoch's changes of (manager, employee) edges give the
changes of (boss, employee) pairs.  Checked against a closure from scratch at every epoch.

    python jobs/examples/hierarchy_closure.py
"""

import argparse

import pyarrow as pa

from timely_spark.testing import run_epochs

EPOCHS = [  # (manager, employee, diff) per epoch
    [("ann", "bob", 1), ("bob", "cid", 1), ("cid", "dee", 1), ("eve", "fay", 1)],
    [("bob", "cid", -1), ("eve", "cid", 1)],          # cid (and dee) move from bob to eve
    [("ann", "eve", 1)],                              # eve's team joins ann's
]


def closure(scope, reports):
    direct = reports.select(boss="manager", employee="employee", diff="diff")
    below = reports.select(employee="manager", below="employee", diff="diff")

    def body(pairs, inner):   # a boss of x is a boss of everyone directly below x
        deeper = pairs.join(below.enter(inner), "employee", running=True)
        return deeper.select(boss="boss", employee="below", diff="diff").concat(direct.enter(inner)).distinct()
    return direct.iterate(body)


def from_scratch(edges):
    pairs = set(edges)
    while True:
        more = {(a, d) for a, b in pairs for c, d in edges if b == c} - pairs
        if not more:
            return pairs
        pairs |= more


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2, help="worker threads")
    args = parser.parse_args()
    batches = [[pa.RecordBatch.from_pylist([dict(manager=m, employee=e, diff=d) for m, e, d in epoch])]
               for epoch in EPOCHS]
    run = run_epochs(closure, batches, threads=args.threads)
    edges: dict = {}
    for t, epoch in enumerate(EPOCHS):
        for m, e, d in epoch:
            edges[(m, e)] = edges.get((m, e), 0) + d
        pairs = {(r["boss"], r["employee"]) for r in run.collection(t).to_pylist()}
        assert pairs == from_scratch({e for e, n in edges.items() if n > 0}), t
        print(t, sorted((r["boss"], r["employee"], r["diff"]) for b in run.by_time.get(t, []) for r in b.to_pylist()))
