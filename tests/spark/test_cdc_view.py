"""jobs/examples/cdc_view.py: a folder of CDC files (insert/update/delete by key, lsn order)
read by readStream, kept by upsert, joined with a dimension and aggregated through
ts.spark.stream; the view read back equals pandas on the files."""

import pytest

from ..example_jobs import example_job


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_cdc_view_equals_pandas_on_the_change_files(spark, tmp_path):
    job = example_job("cdc_view")
    source = tmp_path / "input"
    job.write_changes(source, files=6, per_file=300, customers=200, seed=11)
    got = job.run(spark, source, tmp_path, workers=1, files=6).toPandas()
    want = job.expected(source)
    assert len(want) == 4 and want["customers"].sum() < 200          # deletes and updates happened
    got = got.sort_values("region").reset_index(drop=True).astype({"customers": "int64", "balance": "int64"})
    assert got.to_dict("records") == want.astype({"customers": "int64", "balance": "int64"}).to_dict("records")
    epochs = spark.read.format("timely").load(str(tmp_path / "pipeline" / "input")).select("time").distinct().count()
    assert epochs >= 2                                                  # the view was kept across epochs
