"""Event logs read by Spark: the layout, complete times only, bad input."""

import pytest

import timely_spark as ts
from timely_spark import Product
from timely_spark.capture import EventLogError, Messages, ParquetEventWriter, Progress


def epochs_log(path, open_epoch):
    """Two workers captured epochs 0..2 of word counts; the last epoch may still be open."""
    for w in range(2):
        writer = ParquetEventWriter(path, w, 2, flush_seconds=0.0)
        for epoch in range(3):
            writer.push(Messages(epoch, [{"word": f"w{w}", "n": epoch + 1}]))
            if epoch < 2 or not open_epoch:
                writer.push(Progress([(epoch, -1), (epoch + 1, 1)]))
        if not open_epoch:
            writer.push(Progress([(3, -1)]))
            writer.close()
        else:
            writer.flush()


@pytest.mark.slow
def test_spark_reads_the_layout_directly(spark, tmp_path):
    epochs_log(tmp_path, open_epoch=False)
    raw = spark.read.parquet(str(tmp_path))
    assert {"seq", "kind", "time", "diff", "word", "n", "worker"} <= set(raw.columns)
    rows = sorted((r["time"], r["word"], r["n"]) for r in ts.spark.read_event_log(spark, tmp_path).collect())
    assert rows == [(e, f"w{w}", e + 1) for e in range(3) for w in range(2)]
    assert ts.spark.event_log_frontier(spark, tmp_path).is_empty()


def test_complete_only_leaves_out_the_open_epoch(any_spark, tmp_path):
    epochs_log(tmp_path, open_epoch=True)
    assert ts.spark.event_log_frontier(any_spark, tmp_path).elements() == [2]
    complete = sorted((r["time"], r["word"]) for r in ts.spark.read_event_log(any_spark, tmp_path).collect())
    assert complete == [(e, f"w{w}") for e in range(2) for w in range(2)]
    everything = ts.spark.read_event_log(any_spark, tmp_path, complete_only=False).count()
    assert everything == 6


def test_a_missing_worker_is_an_error_naming_it(spark, tmp_path):
    writer = ParquetEventWriter(tmp_path, 0, 2, flush_seconds=0.0)   # 2 workers, only one wrote
    writer.push(Messages(0, [{"x": 1}]))
    writer.push(Progress([(0, -1)]))
    writer.close()
    with pytest.raises(EventLogError, match=r"no directory for worker\(s\) \[1\]"):   # was: silently empty
        ts.spark.read_event_log(spark, tmp_path)


def test_product_times(spark, tmp_path):
    writer = ParquetEventWriter(tmp_path, 0, 1, flush_seconds=0.0)
    writer.push(Messages(Product(0, 1), [{"x": 1}]))
    writer.push(Messages(Product(1, 0), [{"x": 2}]))
    writer.push(Progress([(Product(0, 0), -1), (Product(0, 2), 1), (Product(1, 0), 1)]))
    writer.flush()
    rows = ts.spark.read_event_log(spark, tmp_path).collect()
    assert [(r["time"]["outer"], r["time"]["inner"], r["x"]) for r in rows] == [(0, 1, 1)]


def test_not_an_event_log(spark, tmp_path):
    spark.createDataFrame([(1,)], "x long").write.parquet(str(tmp_path / "plain"))
    with pytest.raises(EventLogError, match="not a timely_spark event log"):
        ts.spark.read_event_log(spark, tmp_path / "plain")


def test_a_log_with_no_commit_yet_says_so(any_spark, tmp_path):
    (tmp_path / "_sink" / "staging").mkdir(parents=True)     # a sink's query stopped before its first commit
    ts.spark.register(any_spark)
    with pytest.raises(EventLogError, match="the timely sink has committed no micro-batch here yet"):
        any_spark.read.format("timely").load(str(tmp_path)).collect()
