"""A job for processes started by hand: ``python mesh_job.py -n 2 -p I -h hostfile -w 2``.
Prints one JSON line with this process's results."""

import json
import sys

import timely_spark as ts


def work(worker):
    seen = []

    def build(scope):
        inp, stream = scope.new_input()
        probe = stream.exchange(lambda x: x).inspect(seen.append).probe()
        return inp, probe

    inp, probe = worker.dataflow(build)
    for epoch in range(3):
        if worker.index == 0:
            inp.send_batch(list(range(epoch * 10, epoch * 10 + 10)))
        inp.advance_to(epoch + 1)
        worker.step_while(lambda: probe.less_than(inp.time), timeout=60)
    return [worker.index, sorted(seen)]


if __name__ == "__main__":
    print(json.dumps(ts.execute_from_args(work, sys.argv[1:])), flush=True)
