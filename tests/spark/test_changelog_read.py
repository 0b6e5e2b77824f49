"""Reading a captured changelog with Spark: the change rows with their diff by default, the
collection as of the log's frontier with ``option("changelog", "consolidate")``."""

import numpy as np
import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.capture import EventLogError, Messages, ParquetEventReader, ParquetEventWriter, Progress

SCHEMA = pa.schema([("k", pa.int64()), ("name", pa.string()), ("diff", pa.int64())])


def write_log(path, epochs: int = 20, open_last: bool = True) -> list:
    """Two workers write random changes (inserts, duplicates, deletions -- a row withdrawn
    by the other worker than the one that added it); the last epoch stays open.  Returns
    the changes as one table per worker and epoch, with ``time``."""
    rng = np.random.default_rng(7)
    writers = [ParquetEventWriter(path, w, 2, flush_seconds=0.0, max_rows=10) for w in range(2)]
    live: list = []
    written = []
    for epoch in range(epochs):
        for w, writer in enumerate(writers):
            rows = []
            for _ in range(int(rng.integers(0, 6))):
                if live and rng.random() < 0.4:
                    rows.append({**live.pop(int(rng.integers(len(live)))), "diff": -1})
                else:
                    row = {"k": int(rng.integers(0, 6)), "name": str(rng.choice(["a", "b"]))}
                    n = int(rng.integers(1, 3))
                    live.extend([row] * n)
                    rows.append({**row, "diff": n})
            batch = pa.RecordBatch.from_pylist(rows, schema=SCHEMA)
            writer.push(Messages(epoch, [batch]))
            if epoch < epochs - 1 or not open_last:
                writer.push(Progress([(epoch, -1), (epoch + 1, 1)]))
            written.append(pa.Table.from_batches([batch]).append_column(
                "time", pa.array([epoch] * batch.num_rows, pa.int64())))
    for writer in writers:
        writer.flush()
    return written


def rows(table) -> list:
    return sorted(map(str, table.to_pylist()))


def test_the_consolidated_read_is_the_collection_as_of_the_frontier(spark, tmp_path):
    written = pa.concat_tables(write_log(tmp_path))
    changes = spark.read.format("timely").load(str(tmp_path))
    assert changes.columns == ["time", "worker", "k", "name", "diff"]       # the default: change rows, with diff
    change_rows = pa.Table.from_pandas(changes.toPandas(), preserve_index=False)
    assert change_rows.num_rows == sum(1 for t in written["time"].to_pylist() if t < 19)    # epoch 19 is open
    view = spark.read.format("timely").option("changelog", "consolidate").load(str(tmp_path))
    assert view.columns == ["k", "name"]
    got = pa.Table.from_pandas(view.toPandas(), preserve_index=False)
    expect = ts.collection(written.select(["time", "k", "name", "diff"]), as_of=18)
    assert expect.num_rows > 0 and rows(got) == rows(expect)
    assert rows(got) == rows(ts.collection(change_rows))
    everything = spark.read.format("timely").option("changelog", "consolidate").option("complete_only", "false") \
        .load(str(tmp_path))
    assert sorted(map(str, everything.toPandas().to_dict("records"))) == rows(ts.collection(written))


def test_a_replayed_changelog_keeps_its_diffs(tmp_path):
    write_log(tmp_path, epochs=3, open_last=False)
    reader = ParquetEventReader(tmp_path, 0)
    batches = []
    while True:
        try:
            event = reader.next()
        except StopIteration:
            break
        if event is None:
            break
        if isinstance(event, Messages):
            batches.extend(event.data)
    assert batches and all(b.schema.names == ["k", "name", "diff"] for b in batches)


def test_a_bad_changelog_option_or_diff_is_an_error(spark, tmp_path):
    write_log(tmp_path / "log", epochs=2)
    with pytest.raises(EventLogError, match="option changelog must be one of changes, consolidate"):
        spark.read.format("timely").option("changelog", "latest").load(str(tmp_path / "log")).collect()
    writer = ParquetEventWriter(tmp_path / "bad", 0, 1, flush_seconds=0.0)
    writer.push(Messages(0, [pa.record_batch({"x": [1], "diff": [0.5]})]))
    with pytest.raises(ts.ChangelogError, match="'diff' column must be integers"):
        writer.flush()


def test_hash_buckets_split_the_collection_without_losing_or_repeating_a_row(tmp_path):
    """What each Spark task of a consolidated read computes, over real part files: three
    buckets, disjoint, whose union is the collection."""
    from timely_spark.capture import LogIndex
    from timely_spark.spark.log_collection import bucket_partitions, read_collection

    written = pa.concat_tables(write_log(tmp_path))
    snap = LogIndex(str(tmp_path)).snapshot()
    target = pa.schema([("k", pa.int64()), ("name", pa.string())])
    source = pa.schema([snap.schema.field("time"), ("worker", pa.int64()), *target, ("diff", pa.int64())])
    parts = [pa.Table.from_batches(list(read_collection(p, target)), target)
             for p in bucket_partitions(snap.complete(), 3, source)]
    keys = [set(rows(p.select(["k", "name"]))) for p in parts]
    assert sum(1 for k in keys if k) >= 2 and not (keys[0] & keys[1] or keys[0] & keys[2] or keys[1] & keys[2])
    assert rows(pa.concat_tables(parts)) == rows(ts.collection(written, as_of=18))
