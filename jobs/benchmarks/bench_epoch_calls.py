"""Python calls (C calls included, by cProfile) per worker and epoch of the epoch across
2 processes of ``bench_rounds.py --only epoch`` (one record to the other worker and back,
``advance_to``, a probe), and the worker's steps an epoch: a count the machine's load moves
only through the steps the frames' arrival takes, unlike the clock.
With ``--top N``, worker 0's N most called functions, calls per epoch.

    python jobs/benchmarks/bench_epoch_calls.py [--epochs 3000] [--top 0]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats

import timely_spark as ts

WARM = 200


def calls_per_epoch(epochs: int, top: int) -> list:
    def work(worker):
        def build(scope):
            inp, stream = scope.new_input()
            return inp, stream.exchange(lambda r: 1).exchange(lambda r: 0).probe()

        inp, probe = worker.dataflow(build)
        ts.sync.Barrier(worker).wait()
        profile = cProfile.Profile()
        for epoch in range(WARM + epochs):
            if epoch == WARM:
                profile.enable()
            if worker.index == 0:
                inp.send(epoch)
            inp.advance_to(epoch + 1)
            while probe.less_than(epoch + 1):
                worker.step()
        profile.disable()
        stats = pstats.Stats(profile).stats      # type: ignore[attr-defined]
        total = sum(v[1] for v in stats.values()) / epochs
        steps = sum(v[1] for k, v in stats.items() if k[0].endswith("worker.py") and k[2] == "step") / epochs
        rows = sorted(((v[1] / epochs, f"{k[0].rsplit('/', 1)[-1]}:{k[2]}") for k, v in stats.items()), reverse=True)
        return worker.index, total, steps, rows[:top]

    return ts.execute(work, processes=2, threads=1, timeout=600)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=3000)
    parser.add_argument("--top", type=int, default=0)
    args = parser.parse_args()
    for index, total, steps, rows in calls_per_epoch(args.epochs, args.top):
        print(f"worker {index}: {total:.0f} Python calls an epoch ({steps:.2f} steps)")
        for n, name in rows if index == 0 else []:
            print(f"  {n:7.2f}  {name}")


if __name__ == "__main__":
    main()
