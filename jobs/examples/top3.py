"""A running top 3 per key (``group_by(...).top_k``): the three highest scores of each
player, kept current as scores are added and withdrawn -- a withdrawn top score is
replaced by the next one.  Checked against pandas from scratch at every epoch.

    python jobs/examples/top3.py
"""

import argparse

import pyarrow as pa

import timely_spark as ts
from timely_spark.testing import run_epochs

EPOCHS = [  # the changes of each epoch
    pa.table({"player": ["ann", "ann", "ann", "bob"], "score": [10, 30, 20, 5], "diff": [1, 1, 1, 1]}),
    pa.table({"player": ["ann", "bob"], "score": [40, 7], "diff": [1, 1]}),
    pa.table({"player": ["ann", "ann", "ann"], "score": [40, 30, 1], "diff": [-1, -1, 1]}),
]


def top3(scope, scores):
    return scores.group_by("player").top_k(3, [("score", "descending")])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2, help="worker threads")
    args = parser.parse_args()
    run = run_epochs(top3, [epoch.to_batches() for epoch in EPOCHS], threads=args.threads)
    for t in range(len(EPOCHS)):
        scores = ts.collection(pa.concat_tables(EPOCHS[:t + 1])).to_pandas()
        best = scores.sort_values(["player", "score"], ascending=[True, False]).groupby("player").head(3)
        kept = run.collection(t).to_pandas().sort_values(["player", "score"], ascending=[True, False])
        assert kept.values.tolist() == best.values.tolist(), t
        print(t, kept.values.tolist())
