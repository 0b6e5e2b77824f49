"""A running top 3 per key (``group_by(...).top_k``): the three highest scores of each
player, kept current as scores are added and withdrawn -- a withdrawn top score is
replaced by the next one.  Checked against pandas from scratch at every epoch.

    python jobs/examples/top3.py
"""

import argparse

import pyarrow as pa

import timely_spark as ts
from timely_spark.testing import run_epochs

EPOCHS = [  # (player, score, diff) per epoch
    [("ann", 10, 1), ("ann", 30, 1), ("ann", 20, 1), ("bob", 5, 1)],
    [("ann", 40, 1), ("bob", 7, 1)],
    [("ann", 40, -1), ("ann", 30, -1), ("ann", 1, 1)],
]


def top3(scope, scores):
    return scores.group_by("player").top_k(3, [("score", "descending")])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2, help="worker threads")
    args = parser.parse_args()
    batches = [[pa.RecordBatch.from_pylist([dict(player=p, score=s, diff=d) for p, s, d in epoch])]
               for epoch in EPOCHS]
    run = run_epochs(top3, batches, threads=args.threads)
    for t in range(len(EPOCHS)):
        log = pa.Table.from_pylist([dict(player=p, score=s, diff=d) for e in EPOCHS[:t + 1] for p, s, d in e])
        scores = ts.collection(log).to_pandas()
        best = scores.sort_values(["player", "score"], ascending=[True, False]).groupby("player").head(3)
        kept = run.collection(t).to_pandas().sort_values(["player", "score"], ascending=[True, False])
        assert kept.values.tolist() == best.values.tolist(), t
        print(t, kept.values.tolist())
