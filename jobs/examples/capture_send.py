"""Capture streams in one run and send them to another run over TCP.

Each worker of this run captures the stream 0..9 -- its records and its frontier
changes -- into an EventWriter on a socket to 127.0.0.1:(port_base + worker index).
capture_recv.py, a separate run with any number of workers, replays all of them into
one stream: 5 senders into 3 receiving workers show that captured streams replay
anywhere.  Frames are authenticated with the secret both runs share in
$TIMELY_SPARK_SECRET; without it, both fail at once.

    export TIMELY_SPARK_SECRET=$(python -c 'import secrets; print(secrets.token_hex(16))')
    python jobs/examples/capture_recv.py 5 -w 3 &
    python jobs/examples/capture_send.py -w 5
"""

from __future__ import annotations

import argparse
import socket
import time

import timely_spark as ts
from timely_spark.capture import EventWriter
from timely_spark.capture.stream_io import shared_secret


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     add_help=False)
    parser.add_argument("--help", action="help")
    parser.add_argument("--port-base", type=int, default=8000)
    args, timely_args = parser.parse_known_args()
    secret = shared_secret("capture_send.py")

    def work(worker):
        address = ("127.0.0.1", args.port_base + worker.index)
        deadline = time.monotonic() + 60
        while True:
            try:
                sock = socket.create_connection(address, timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        writer = EventWriter(sock, secret=secret)
        worker.dataflow(lambda scope: scope.to_stream(range(10)).capture_into(writer))
        while worker.step():
            pass
        writer.close()
        sock.close()

    ts.execute_from_args(work, timely_args)


if __name__ == "__main__":
    main()
