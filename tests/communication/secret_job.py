"""A job for the recorder test: ``python secret_job.py -n 2 -p I -h hostfile -w 1``.

Worker 0 sends worker 1 a record holding MARKER and an Arrow batch whose column holds
COLUMN; each worker prints (one JSON line) whether it received what was sent to it.
"""

import json
import sys

import pyarrow as pa

import timely_spark as ts

MARKER = "timely-spark-recorder-marker-5f0c9d2e"
COLUMN = [0x5EC12E7_0000 + i for i in range(64)]       # distinctive int64 values


def work(worker):
    got = {"marker": False, "column": False}

    def build(scope):
        records, stream = scope.new_input()
        stream.exchange(lambda r: 1).inspect(lambda r: got.__setitem__("marker", r == MARKER))
        batches, arrow = scope.new_input()
        arrow.exchange(lambda b: 1).inspect(
            lambda b: got.__setitem__("column", b.column(0).to_pylist() == COLUMN))
        return records, batches

    records, batches = worker.dataflow(build)
    if worker.index == 0:
        records.send(MARKER)
        batches.send_batch([pa.record_batch({"secret": pa.array(COLUMN, pa.int64())})])
    records.close()
    batches.close()
    while worker.step():
        pass
    return got


if __name__ == "__main__":
    print(json.dumps(ts.execute_from_args(work, sys.argv[1:])), flush=True)
