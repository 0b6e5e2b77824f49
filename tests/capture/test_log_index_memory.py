"""A follower's memory does not grow with the log: reading a large compacted file's
summary takes Arrow memory bounded by a read batch, not by the file (a follower reads
every compacted file that appears; were each read as big as the file, the follower's
peak -- which its allocator keeps -- would grow with the log)."""

import numpy as np
import pyarrow as pa

from timely_spark.capture import Messages, ParquetEventWriter, Progress
from timely_spark.capture.compact import compact
from timely_spark.capture.log_index import LogIndex
from timely_spark.capture.part_file import READ_BATCH_ROWS
from timely_spark.progress import Product

ROWS_PER_EPOCH, EPOCHS = 200_000, 5
SCHEMA = pa.schema([("x", pa.int64())])


def test_summarizing_a_large_compacted_file_takes_memory_bounded_by_a_batch(tmp_path):
    w = ParquetEventWriter(tmp_path, flush_seconds=0.0, schema=SCHEMA)
    for t in range(EPOCHS):
        w.push(Messages(t, [pa.record_batch([pa.array(np.arange(ROWS_PER_EPOCH))], schema=SCHEMA)]))
        w.push(Progress([(t, -1), (t + 1, 1)]))
    assert compact(tmp_path, min_files=2, grace=0.0)["compacted"] == EPOCHS
    rows = ROWS_PER_EPOCH * EPOCHS
    whole = rows * (1 + 8 + 8)                 # its kind, time and diff columns decoded at once
    pool = pa.proxy_memory_pool(pa.default_memory_pool())     # its own peak, counted from now
    default = pa.default_memory_pool()
    pa.set_memory_pool(pool)
    try:
        snap = LogIndex(tmp_path).snapshot()
    finally:
        pa.set_memory_pool(default)
    assert [p.counts for p in snap.parts] == [[ROWS_PER_EPOCH] * EPOCHS]
    assert snap.frontier.elements() == [EPOCHS]
    assert pool.max_memory() < whole / 2, (pool.max_memory(), whole, READ_BATCH_ROWS)     # twice whole before


def test_a_file_read_in_batches_sums_each_times_rows_over_the_batches(tmp_path):
    w = ParquetEventWriter(tmp_path, flush_seconds=3600.0, schema=SCHEMA)       # one file: flushed at close
    n = READ_BATCH_ROWS + 10                  # each time's rows cross a batch boundary
    for outer in range(3):
        w.push(Messages(Product(outer, 0), [pa.record_batch([pa.array(np.arange(n))], schema=SCHEMA)]))
    w.push(Progress([(Product(0, 0), -1), (Product(2, 1), 1)]))
    w.flush()
    [part] = LogIndex(tmp_path).snapshot().parts
    assert list(zip(part.times, part.counts)) == [(Product(outer, 0), n) for outer in range(3)]
    assert part.progress == [(Product(0, 0), -1), (Product(2, 1), 1)]
