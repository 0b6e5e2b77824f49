"""Connected components by min-label propagation inside ``iterate``, kept current as
edges come and go: every node's label is the smallest node id it is connected to.  A
non-monotone body (``reduce`` keeping the minimum): a withdrawn edge that split a
component raises labels again, exactly.  Checked against a from-scratch computation.

    python jobs/examples/components.py
"""

import argparse

import pyarrow as pa

import timely_spark as ts
from timely_spark.testing import run_epochs

LABEL = pa.schema([("node", pa.int64()), ("label", pa.int64())])
EPOCHS = [  # (src, dst, diff) per epoch
    [(1, 2, 1), (2, 3, 1), (4, 5, 1), (6, 6, 1)],
    [(3, 4, 1)],                                      # two components merge
    [(2, 3, -1)],                                     # and split elsewhere
]


def smallest(rows, keys):   # all the keys that changed at once: one vectorized call
    return rows.group_by(keys).aggregate([("label", "min")]).rename_columns(["node", "label"])


def components(scope, edges):
    both = edges.select(node="src", dst="dst", diff="diff").concat(edges.select(node="dst", dst="src", diff="diff"))
    own = both.select(node="node", label="node", diff="diff").distinct()

    def body(labels, inner):  # each node takes the smallest label among its own and its neighbours'
        offers = labels.join(both.enter(inner), "node", running=True).select(node="dst", label="label", diff="diff")
        return offers.concat(own.enter(inner)).group_by("node").reduce(smallest, LABEL)
    return own.iterate(body)


def from_scratch(edges):
    label = {n: n for e in edges for n in e}
    for _ in label:
        for s, d in edges:
            label[s] = label[d] = min(label[s], label[d])
    return label


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2, help="worker threads")
    args = parser.parse_args()
    logs = [pa.RecordBatch.from_pylist([dict(src=s, dst=d, diff=x) for s, d, x in epoch]) for epoch in EPOCHS]
    run = run_epochs(components, [[log] for log in logs], threads=args.threads)
    for t in range(len(EPOCHS)):
        live = ts.collection(pa.Table.from_batches(logs[:t + 1]))         # the edges at t
        labels = {r["node"]: r["label"] for r in run.collection(t).to_pylist()}
        assert labels == from_scratch(set(zip(live["src"].to_pylist(), live["dst"].to_pylist()))), t
        print(t, sorted(labels.items()))
