"""Benchmark ``stream.upsert`` (a change feed kept as the latest row per key) against
pandas keeping the same view, side by side in one run.

A view of ``--keys`` keys is loaded in the first epoch; then ``--epochs`` epochs of
``--records`` records each (updates of existing keys, new keys, ``--delete-share``
deletes; several records of one key per epoch, ordered by ``seq``) go through
``upsert`` on ``--threads`` worker threads.  The peer is what a pandas user writes:
``pd.concat([view, epoch]).sort_values("seq").drop_duplicates("id", keep="last")``
per epoch, dropping deleted keys.  Prints the median ms per small epoch of each and
the ratio, then checks that the folded changelog equals the pandas view.

    python jobs/benchmarks/bench_upsert.py                     # 1,000,000 keys, 10,000 records/epoch
    python jobs/benchmarks/bench_upsert.py --keys 10000000 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd
import pyarrow as pa

import timely_spark as ts


def feed(keys: int, epochs: int, records: int, delete_share: float, seed: int = 1) -> list:
    """The first epoch loads ``keys`` rows; each later one has ``records`` records."""
    rng = np.random.default_rng(seed)
    first = pa.table({"id": np.arange(keys, dtype=np.int64), "seq": np.zeros(keys, np.int64),
                      "amount": rng.random(keys), "deleted": np.zeros(keys, bool)})
    out = [first]
    for _ in range(epochs):
        ids = rng.integers(0, int(keys * 1.1), records)          # a tenth new keys
        out.append(pa.table({"id": ids, "seq": rng.permutation(records).astype(np.int64),
                             "amount": rng.random(records), "deleted": rng.random(records) < delete_share}))
    return out


def run_upsert(epochs: list, threads: int) -> tuple[list, pa.Table]:
    """Seconds per epoch (from sending it to its output being complete) and the changelog."""
    def work(worker):
        out, seconds = [], []

        def build(scope):
            inp, records = scope.new_input()
            view = records.upsert("id", sequence_by="seq", delete="deleted")
            view.inspect_batch(lambda t, batches: out.extend(batches))
            return inp, view.probe()

        inp, probe = worker.dataflow(build)
        for epoch, table in enumerate(epochs):
            start = time.perf_counter()
            lo, hi = (table.num_rows * i // worker.peers for i in (worker.index, worker.index + 1))
            inp.send_batch(table.slice(lo, hi - lo))
            inp.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(epoch + 1), timeout=600)
            seconds.append(time.perf_counter() - start)
        inp.close()
        while worker.step():
            pass
        return seconds, out

    parts = ts.execute(work, threads=threads)
    seconds = [max(s) for s in zip(*[p[0] for p in parts])]
    changes = [b for p in parts for b in p[1] if b.num_rows]
    return seconds, pa.Table.from_batches(changes)


def run_pandas(epochs: list) -> tuple[list, pd.DataFrame]:
    seconds = []
    view = pd.DataFrame({"id": pd.Series([], dtype="int64"), "seq": pd.Series([], dtype="int64"),
                         "amount": pd.Series([], dtype="float64"), "deleted": pd.Series([], dtype="bool")})
    for table in epochs:
        start = time.perf_counter()
        batch = table.to_pandas().sort_values("seq", kind="stable")
        view = pd.concat([view, batch]).drop_duplicates("id", keep="last")
        view = view[~view["deleted"]]
        seconds.append(time.perf_counter() - start)
    return seconds, view.drop(columns=["deleted"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--delete-share", type=float, default=0.05)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    epochs = feed(args.keys, args.epochs, args.records, args.delete_share)
    ours, changes = run_upsert(epochs, args.threads)
    theirs, view = run_pandas(epochs)
    a, b = statistics.median(ours[1:]) * 1000, statistics.median(theirs[1:]) * 1000
    print(f"{args.keys} keys, {args.records} records/epoch, {args.threads} thread(s)")
    print(f"first epoch: upsert {ours[0]:.2f} s, pandas {theirs[0]:.2f} s")
    print(f"median ms per epoch: upsert {a:.1f}, pandas {b:.1f}, pandas / upsert {b / a:.1f}x")
    folded = ts.collection(changes).to_pandas().sort_values("id").reset_index(drop=True)
    expected = view.sort_values("id").reset_index(drop=True)[folded.columns]
    pd.testing.assert_frame_equal(folded, expected, check_dtype=False)
    print(f"check: the folded changelog equals the pandas view ({len(expected)} rows)")


if __name__ == "__main__":
    main()
