"""The capture seed's sender: each worker sends the stream 0..9 to a receiver over TCP.

Worker i connects to 127.0.0.1:(port_base + i) and captures its stream into an
EventWriter on that socket.  Start capture_recv.py first.  The run's secret comes
from $TIMELY_SPARK_SECRET (events are authenticated frames).

    python jobs/capture_recv.py 5 -w 3 &
    python jobs/capture_send.py -w 5
"""

from __future__ import annotations

import argparse
import socket
import time

import timely_spark as ts
from timely_spark.capture import EventWriter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     add_help=False)
    parser.add_argument("--help", action="help")
    parser.add_argument("--port-base", type=int, default=8000)
    args, timely_args = parser.parse_known_args()

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
        writer = EventWriter(sock)
        worker.dataflow(lambda scope: scope.to_stream(range(10)).capture_into(writer))
        while worker.step():
            pass
        writer.close()
        sock.close()

    ts.execute_from_args(work, timely_args)


if __name__ == "__main__":
    main()
