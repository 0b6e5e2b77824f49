"""``ts.spark.stream`` and a graph stream form over Spark Connect (the test session's own
Connect server, loopback): the same expectations as on the classic session -- equal to
the batch computation at every complete epoch, the output as a streaming DataFrame, and
``stop()`` leaving no query, job or thread running -- with nothing reaching the JVM."""

import threading

import pytest

import timely_spark as ts

from .stream_pipeline_job import OUTPUT, counts, source
from .test_stream_pipeline import changes_by_epoch, check_every_epoch, table, write_files


def nothing_running(session):
    assert not session.streams.active
    assert not [t for t in threading.enumerate() if t.name == "timely_spark stream job"]


#: ``any_spark``'s Connect session only (its classic run is test_stream_pipeline.py's).
OVER_CONNECT = pytest.mark.parametrize("any_spark", ["connect"], indirect=True)


@pytest.mark.slow
@pytest.mark.timeout(600)
@OVER_CONNECT
def test_one_call_over_connect_equals_the_batch_computation_and_stops_everything(any_spark, tmp_path):
    connect_spark = any_spark
    folder, root = tmp_path / "src", tmp_path / "ckpt"
    write_files(folder, 0, 4)
    with ts.spark.stream(source(connect_spark, folder), counts, OUTPUT, checkpoint=str(root),
                         snapshot_every=1.0) as pipe:
        assert pipe.workers == 1
        pipe.await_epoch(3, timeout=400)
        query = pipe.start_output(pipe.df.writeStream.format("memory").queryName("stream_pipeline_connect_out"))
        query.processAllAvailable()
        progress = pipe.last_progress
    assert progress["epoch_in"] == progress["epoch_out"] == 3 and progress["lag_epochs"] == 0
    nothing_running(connect_spark)
    check_every_epoch(connect_spark, root, 4)
    seen = connect_spark.table("stream_pipeline_connect_out").toArrow()
    assert changes_by_epoch(seen) == changes_by_epoch(table(connect_spark, root / "output"))
