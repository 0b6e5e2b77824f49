"""Barrier and Sequencer inside Spark barrier tasks."""


import timely_spark as ts

from ..sync.test_sync import barrier_rounds, sequence


def test_barrier_in_spark_tasks(spark):
    logs = ts.spark.run(spark, barrier_rounds, workers=2)
    for k in range(len(logs[0])):
        assert min(log[k][2] for log in logs) >= max(log[k][1] for log in logs)


def test_sequencer_in_spark_tasks(spark):
    a, b = ts.spark.run(spark, sequence, workers=2)
    assert a == b and sorted(a) == sorted((i, k) for i in range(2) for k in range(5 + 3 * i))
