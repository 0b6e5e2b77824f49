"""Entry point of a local worker process: ``python -m timely_spark.child FD PARENT_PID`` (see
:mod:`timely_spark.launch`, which starts it)."""

import sys

from .launch import child_main

if __name__ == "__main__":
    child_main(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0)
