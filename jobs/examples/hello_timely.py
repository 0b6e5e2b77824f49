"""A small local timely dataflow: words by epoch, counted once each epoch is complete.

Each worker reads its share of some text, one line per epoch; words are exchanged
by a stable hash so that each word is counted on one worker, and each epoch's
counts are printed only when the epoch is complete everywhere (a notification).
A loop then computes, for each count, how many halvings bring it to 1.

    python jobs/examples/hello_timely.py --threads 2
"""

from __future__ import annotations

import argparse

import timely_spark as ts

TEXT = [
    "the quick brown fox jumps over the lazy dog",
    "the dog barks and the fox runs",
    "a lazy afternoon for a lazy dog",
]


def work(worker: ts.Worker) -> list:
    report = []

    def build(scope):
        inp, lines = scope.new_input()
        words = lines.flat_map(str.split).map(lambda w: (w, 1))
        counts = words.aggregate(lambda word, one, n: (n or 0) + one, lambda word, n: (word, n))

        def halvings(inner):
            handle, cycle = inner.feedback(1)
            state = counts.map(lambda wn: (wn[0], wn[1], wn[1])).enter(inner).concat(cycle)
            done, going = state.branch(lambda s: s[2] > 1)
            going.map(lambda s: (s[0], s[1], s[2] // 2)).connect_loop(handle)
            return done.unary(None, "Rounds", lambda cap, info: (cap.drop(), _rounds)[1]).leave()

        probe = (scope.iterative(halvings)
                 .inspect_time(lambda t, x: report.append((t, worker.index) + x))
                 .probe())
        return inp, probe

    inp, probe = worker.dataflow(build)
    for epoch, line in enumerate(TEXT):
        if epoch % worker.peers == worker.index:
            inp.send(line)
        inp.advance_to(epoch + 1)
        worker.step_while(lambda: probe.less_than(inp.time), timeout=60)
    inp.close()
    return report


def _rounds(input, output):
    for cap, batch in input:
        output.session(cap).give_batch([(word, n, cap.time.inner) for word, n, _ in batch])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-w", "--threads", type=int, default=2, help="worker threads (default 2)")
    args = parser.parse_args()
    rows = sorted(r for part in ts.execute(work, threads=args.threads) for r in part)
    for epoch, index, word, n, rounds in rows:
        print(f"epoch {epoch}  worker {index}  {word:<10} count {n}  halvings to 1: {rounds}")
    print(f"{len(rows)} (epoch, word) counts from {args.threads} workers")


if __name__ == "__main__":
    main()
