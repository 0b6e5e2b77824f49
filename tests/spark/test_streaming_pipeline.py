"""End to end on local[2]: records -> Structured Streaming -> timely sink -> a timely job
following the log (ts.graph.components) -> a captured log of changes -> readStream,
for at least 10 epochs; the consolidated changes equal the batch algorithm on all input.

The pipeline is timely_spark.graph.streaming.run_pipeline (what jobs/examples/streaming_components.py
runs), run here in-process on the test session."""

import pytest

from timely_spark.graph.streaming import run_pipeline


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_three_stage_pipeline_for_ten_epochs_equals_the_batch_algorithm(any_spark, tmp_path):
    result = run_pipeline(any_spark, tmp_path, seconds=0, rate=40, interval=0.25, pool=60, printer=None,
                              min_epochs=10, timeout=240)
    assert result["epochs"] >= 10
    assert result["edges"] == 2 * result["records"]
    assert result["ok"], result
    assert 0 < sum(result["changes"].values()) and max(result["changes"]) == result["epochs"] - 1
