"""A driver for the pipeline tests: ``python stream_pipeline_job.py SOURCE CHECKPOINT EPOCHS`` runs
``ts.spark.stream`` on local[2] over the JSON files in SOURCE (one file a micro-batch, one
a second) with a running count per word, until output epoch EPOCHS - 1 is complete;
then it stops the pipeline and exits 0.  The test SIGKILLs it part way and starts it again
on the same CHECKPOINT."""

import os
import sys

import timely_spark as ts

#: The input's schema and what the pipeline computes (shared with the tests).
SCHEMA = "word string, n long"
OUTPUT = "word string, count_all long, n_sum long, diff long"


def counts(scope, records):
    """Per word, the running count and sum of ``n``: a changelog."""
    return records.group_by("word").aggregate([([], "count_all"), ("n", "sum")], running=True)


def source(spark, folder):
    """The JSON files of ``folder`` as a stream, one file a micro-batch (in the order of their times)."""
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(folder))


def main() -> None:
    folder, checkpoint, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = ts.spark.get_session("timely stream pipeline job", master="local[2]")
    pipeline = ts.spark.stream(source(spark, folder), counts, OUTPUT, checkpoint=checkpoint, workers=1,
                               snapshot_every=0.5, trigger={"processingTime": "1 second"})
    with pipeline:
        pipeline.await_epoch(epochs - 1, timeout=600, report=lambda line: print(line, flush=True))
    spark.stop()


if __name__ == "__main__":
    main()
