"""The seed's barrier demo: workers fall out of step on purpose, then re-synchronize.

Each round, worker i sleeps i units, then waits at a ``ts.sync.Barrier``; it prints
the elapsed time before and after the wait.  The first times differ, the second
ones are (nearly) the same.  Takes timely's flags (-w threads, -n processes, ...).

    python jobs/examples/barrier_demo.py -w 2 --rounds 4
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
    parser.add_argument("--unit", type=float, default=0.25, help="seconds of sleep per worker index")
    args, timely_args = parser.parse_known_args()

    def work(worker):
        timer = time.monotonic()
        barrier = ts.sync.Barrier(worker)
        for _ in range(args.rounds):
            time.sleep(args.unit * worker.index)       # screw up synchronization...
            before = time.monotonic() - timer
            barrier.wait(timeout=600)                  # ...then re-synchronize
            after = time.monotonic() - timer
            sys.stdout.write(f"Worker {worker.index}: {before:.6f}s\t{after:.6f}s\n")   # one write per line
            sys.stdout.flush()

    ts.execute_from_args(work, timely_args or ["-w", "2"])


if __name__ == "__main__":
    sys.exit(main())
