"""Reachability from a set of roots, kept current as edges come and go (``iterate``).

Each epoch adds and withdraws edges; the dataflow emits only the nodes that became
reachable or stopped being reachable.  Checked against a breadth-first search from
scratch at every epoch.

    python jobs/examples/reachability.py
"""

import argparse

import pyarrow as pa

from timely_spark.testing import run_epochs

ROOTS = pa.table({"node": [0], "diff": [1]})
EPOCHS = [  # (src, dst, diff) per epoch: a path 0-1-2-3-4, cut at 2-3, then mended by 1-3
    [(0, 1, 1), (1, 2, 1), (2, 3, 1), (3, 4, 1), (5, 6, 1)],
    [(2, 3, -1)],
    [(1, 3, 1), (4, 5, 1)],
]


def reachable(scope, edges):
    roots = scope.to_stream(ROOTS)
    links = edges.select(node="src", dst="dst", diff="diff")

    def body(nodes, inner):   # the next approximation: the roots and one more hop
        hop = nodes.join(links.enter(inner), "node", running=True).select(node="dst", diff="diff")
        return hop.concat(roots.enter(inner)).distinct()
    return roots.iterate(body)


def bfs(edges):
    seen, todo = {0}, [0]
    while todo:
        n = todo.pop()
        for s, d in edges:
            if s == n and d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2, help="worker threads")
    args = parser.parse_args()
    batches = [[pa.RecordBatch.from_pylist([dict(src=s, dst=d, diff=x) for s, d, x in epoch])] for epoch in EPOCHS]
    run = run_epochs(reachable, batches, threads=args.threads)
    edges: dict = {}
    for t, epoch in enumerate(EPOCHS):
        for s, d, x in epoch:
            edges[(s, d)] = edges.get((s, d), 0) + x
        nodes = set(run.collection(t).column("node").to_pylist())
        assert nodes == bfs({e for e, n in edges.items() if n > 0}), t
        print(t, sorted((r["node"], r["diff"]) for b in run.by_time.get(t, []) for r in b.to_pylist()), sorted(nodes))
