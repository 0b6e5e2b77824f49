"""The seed's sequencer demo: workers announce things at their own pace; everyone
sees the announcements in the same order.

Each round, worker i sleeps (1 + i) units and pushes "worker i, round r" into a
``ts.sync.Sequencer``; every worker prints what it receives.  Group the output by
observing worker: the sequences are identical.  Takes timely's flags.

    python jobs/examples/sequencer_demo.py -w 2 --rounds 4
"""

from __future__ import annotations

import argparse
import sys
import time

import timely_spark as ts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     add_help=False)
    parser.add_argument("--help", action="help")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--unit", type=float, default=0.1, help="seconds of sleep per round unit")
    args, timely_args = parser.parse_known_args()

    def work(worker):
        timer = time.monotonic()
        sequencer = ts.sync.Sequencer(worker, timer=worker.timer)
        total = args.rounds * worker.peers
        seen = 0

        def show(element):
            nonlocal seen
            seen += 1
            line = f"{time.monotonic() - timer:.6f}s:\tWorker {worker.index}:\t recv'd: {element!r}\n"
            sys.stdout.write(line)        # one write per line: worker threads print concurrently
            sys.stdout.flush()

        for round in range(args.rounds):
            time.sleep(args.unit * (1 + worker.index))
            sequencer.push(f"worker {worker.index}, round {round}")
            worker.step()
            for element in sequencer:
                show(element)
        while seen < total:
            show(sequencer.wait_next(timeout=600))
        sequencer.close()

    ts.execute_from_args(work, timely_args or ["-w", "2"])


if __name__ == "__main__":
    sys.exit(main())
