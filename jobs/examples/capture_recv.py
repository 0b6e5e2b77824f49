"""Replay N streams captured by another run (capture_send.py) into this run's workers.

``capture_recv.py N`` listens for N senders on 127.0.0.1:(port_base + i), i < N;
worker w takes the senders with i % peers == w, and all of them replay what they
receive into one stream, printing each record.  With 5 senders the output is 50
lines: five copies of 0..9, interleaved -- any number of captured streams replay
into any number of workers.  Frames are authenticated with $TIMELY_SPARK_SECRET,
which both runs need (without it, this fails at once).

    export TIMELY_SPARK_SECRET=$(python -c 'import secrets; print(secrets.token_hex(16))')
    python jobs/examples/capture_recv.py 5 -w 3 &
    python jobs/examples/capture_send.py -w 5
"""

from __future__ import annotations

import argparse
import sys

import timely_spark as ts
from timely_spark.capture import EventReader, replay_into
from timely_spark.capture.stream_io import shared_secret
from timely_spark.communication.tcp import bind_listener


def show(record) -> None:
    # one write per line: worker threads print concurrently, and print() writes the
    # text and the newline separately, which lets lines interleave
    sys.stdout.write(f"replayed: {record}\n")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     add_help=False)
    parser.add_argument("--help", action="help")
    parser.add_argument("source_peers", type=int)
    parser.add_argument("--port-base", type=int, default=8000)
    args, timely_args = parser.parse_known_args()
    secret = shared_secret("capture_recv.py")

    def work(worker):
        listeners = [bind_listener("127.0.0.1", args.port_base + i)
                     for i in range(args.source_peers) if i % worker.peers == worker.index]
        readers = []
        for listener in listeners:
            listener.settimeout(120)
            sock, _ = listener.accept()
            listener.close()
            readers.append(EventReader(sock, secret=secret))
        worker.dataflow(lambda scope: replay_into(readers, scope).inspect(show))

    ts.execute_from_args(work, timely_args)


if __name__ == "__main__":
    main()
