"""Benchmark of the one-process engine, next to its peers in the same run.

1. Pipeline: 1,000,000 ints in batches of 10,000 -> map(x*2) -> filter(x % 3 != 0)
   -> count per key x % 1000, on one worker.  Peers: bytewax (if installed) and a
   plain Python loop over the same batches calling the same functions; also shown,
   for reference, a loop with the functions inlined by hand.
2. Loop: one record circulating through ``iterative`` + ``feedback`` for 100,000
   rounds: microseconds per round.

    python jobs/benchmarks/bench_engine.py [--records N] [--rounds N]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import timely_spark as ts

BATCH = 10_000


def double(x):
    return x * 2


def keep(x):
    return x % 3 != 0


def key(x):
    return x % 1000


def batches_of(records: int) -> list[list[int]]:
    return [list(range(i, min(i + BATCH, records))) for i in range(0, records, BATCH)]


def timely_pipeline(batches: list[list[int]]) -> Counter:
    def work(worker):
        result = Counter()

        def build(scope):
            inp, stream = scope.new_input()
            counts = (stream.map(double).filter(keep).map(key)
                      .accumulate(Counter(), lambda acc, batch: (acc.update(batch), acc)[1]))
            probe = counts.inspect(result.update).probe()
            return inp, probe

        inp, probe = worker.dataflow(build)
        for batch in batches:
            inp.send_batch(batch)
        inp.close()
        worker.step_while(lambda: not probe.done(), timeout=600)
        return result

    return ts.execute(work)[0]


def plain_loop(batches: list[list[int]]) -> Counter:
    counts: dict[int, int] = {}
    for batch in batches:
        for x in batch:
            y = double(x)
            if keep(y):
                k = key(y)
                counts[k] = counts.get(k, 0) + 1
    return Counter(counts)


def inlined_loop(batches: list[list[int]]) -> Counter:
    counts: dict[int, int] = {}
    for batch in batches:
        for x in batch:
            y = x * 2
            if y % 3 != 0:
                k = y % 1000
                counts[k] = counts.get(k, 0) + 1
    return Counter(counts)


def bytewax_pipeline(batches: list[list[int]]) -> Counter | None:
    try:
        import bytewax.operators as op
        from bytewax.dataflow import Dataflow
        from bytewax.testing import TestingSink, TestingSource, run_main
    except ImportError:
        return None
    flow = Dataflow("bench")
    records = [x for b in batches for x in b]
    s = op.input("inp", flow, TestingSource(records, batch_size=BATCH))
    s = op.map("double", s, double)
    s = op.filter("keep", s, keep)
    counts = op.count_final("count", s, lambda x: str(key(x)))
    out: list = []
    op.output("out", counts, TestingSink(out))
    run_main(flow)
    return Counter({int(k): v for k, v in out})


def timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


def loop_rounds(rounds: int) -> float:
    def build(scope):
        def loop(inner):
            handle, cycle = inner.feedback(1)
            x = scope.to_stream(["token"]).enter(inner).concat(cycle)
            done, again = x.branch_when(lambda t: t.inner < rounds)
            again.connect_loop(handle)
            return done.leave()

        return scope.iterative(loop).probe()

    def work(worker):
        probe = worker.dataflow(build)
        start = time.perf_counter()
        worker.step_while(lambda: not probe.done(), timeout=3600)
        return time.perf_counter() - start

    return ts.execute(work)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=100_000)
    args = parser.parse_args()

    batches = batches_of(args.records)
    n = args.records
    t_timely, r_timely = timed(timely_pipeline, batches)
    t_plain, r_plain = timed(plain_loop, batches)
    t_inline, r_inline = timed(inlined_loop, batches)
    t_bw, r_bw = timed(bytewax_pipeline, batches)
    assert r_timely == r_plain == r_inline, "timely and the plain loop disagree"
    print(f"pipeline, {n:,} records in batches of {BATCH:,}, 1 worker")
    print(f"  timely_spark          {n / t_timely:12,.0f} records/s")
    print(f"  plain loop (same fns) {n / t_plain:12,.0f} records/s   timely/plain  = {t_plain / t_timely:.2f}")
    print(f"  loop, inlined by hand {n / t_inline:12,.0f} records/s   timely/inline = {t_inline / t_timely:.2f}")
    if r_bw is None:
        print("  bytewax               not installed (pip install bytewax)")
    else:
        assert r_bw == r_timely, "bytewax and timely disagree"
        print(f"  bytewax               {n / t_bw:12,.0f} records/s   timely/bytewax = {t_bw / t_timely:.2f}")

    elapsed = loop_rounds(args.rounds)
    print(f"loop, 1 record for {args.rounds:,} rounds: {elapsed / args.rounds * 1e6:.1f} us per round "
          f"(timely-dataflow in Rust: about 1.6 us)")


if __name__ == "__main__":
    main()
