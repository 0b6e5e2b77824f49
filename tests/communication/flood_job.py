"""Process 1 of a two-process mesh, started by a test: ``python flood_job.py FD HOST PORT``,
``FD`` its bound listener (inherited), ``HOST:PORT`` process 0's listener.  Its one worker
(global worker 2) floods worker 0 of process 0 with 1 MB Arrow batches until it is killed
(it prints ``connected`` once the mesh is up)."""

import socket
import sys
import time

import numpy as np
import pyarrow as pa

from timely_spark.communication.codec import encode
from timely_spark.communication.tcp import Mesh
from timely_spark.communication.thread import ThreadFabric

MB = 1 << 20

if __name__ == "__main__":
    fd, host, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    listener = socket.socket(fileno=fd)
    addresses = [(host, port), listener.getsockname()[:2]]
    mesh = Mesh(1, addresses, listener, b"k", ThreadFabric(1, offset=2), 1, peer_timeout=600,
                connect_timeout=30, inbound_limit=MB)
    mesh.connect()
    print("connected", flush=True)
    conn = mesh.connections[0]
    batch = pa.record_batch({"x": pa.array(np.arange(MB // 8))})
    for i in range(1000):                            # far past the bound: its sends wait (held)
        kind, parts = encode((i, [batch]))
        conn.send(7, 2, 0, kind, parts)
        conn.flush()
    time.sleep(600)                                  # (killed long before)
