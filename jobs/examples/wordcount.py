"""Streaming-style word count over epochs, on Spark barrier workers.

Each text file of the input directory is one epoch (in file-name order).  Every
worker reads its share of each file's lines, words are exchanged so that each
word is counted by one worker, and each epoch's counts are emitted as soon as the
epoch is complete -- while later epochs are still being read.  Counts are written
as Parquet ``(epoch, word, count, worker, emitted)`` -- ``emitted`` is when the worker
emitted the count, in seconds since it started -- and the top words of each epoch are
printed.

    spark-submit jobs/examples/wordcount.py --input texts/ --out /tmp/wordcount
    python jobs/examples/wordcount.py            # generates a few sample files
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

import timely_spark as ts

SAMPLE = [
    "the quick brown fox jumps over the lazy dog",
    "a timely dataflow knows when an epoch is complete",
    "the dog sleeps and the fox runs away from the dog",
]


def count_epochs(files: list[str]):
    """A worker function: returns ``[(epoch, word, count, worker, seconds when emitted)]``."""

    def work(worker):
        emitted = []

        def build(scope):
            inp, lines = scope.new_input("Lines")
            counts = (lines.flat_map(lambda line: re.findall(r"[a-z']+", line.lower()))
                      .map(lambda w: (w, 1))
                      .aggregate(lambda w, one, n: (n or 0) + one, lambda w, n: (w, n)))
            probe = counts.inspect_time(
                lambda t, wn: emitted.append((t, wn[0], wn[1], worker.index, worker.elapsed()))).probe()
            return inp, probe

        inp, probe = worker.dataflow(build)
        for epoch, path in enumerate(files):
            with open(path) as f:
                mine = [line for i, line in enumerate(f) if i % worker.peers == worker.index]
            inp.send_batch(mine)
            inp.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(inp.time), timeout=600)   # epoch complete
        inp.close()
        return emitted

    return work


def sample_input(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for i, text in enumerate(SAMPLE):
        (directory / f"epoch-{i:03d}.txt").write_text("\n".join([text] * (i + 2)) + "\n")
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", help="directory of text files, one per epoch (default: a generated sample)")
    parser.add_argument("--out", default="out/wordcount", help="Parquet output directory")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--top", type=int, default=3, help="words to print per epoch")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[2])")
    args = parser.parse_args()

    spark = ts.spark.get_session("timely wordcount", master=args.master)
    source = Path(args.input) if args.input else sample_input(Path(tempfile.mkdtemp(prefix="wordcount-")))
    files = sorted(str(p.resolve()) for p in source.iterdir() if p.is_file())
    if not files:
        raise SystemExit(f"{source}: no input files")
    start = time.perf_counter()
    rows = [r for part in ts.spark.run(spark, count_epochs(files), workers=args.workers) for r in part]
    elapsed = time.perf_counter() - start
    df = spark.createDataFrame(rows, "epoch long, word string, count long, worker long, emitted double")
    df.write.mode("overwrite").parquet(args.out)
    for epoch in range(len(files)):
        top = sorted(((n, w) for t, w, n, _, _ in rows if t == epoch), key=lambda p: (-p[0], p[1]))[:args.top]
        print(f"epoch {epoch}: " + ", ".join(f"{w} {n}" for n, w in top))
    print(f"{len(files)} epochs, {len(rows)} (epoch, word) counts, {args.workers} timely workers, "
          f"{elapsed:.1f} s; written to {args.out}")


if __name__ == "__main__":
    main()
