"""The EventLogError a Spark error's text carries is the one its traceback ends with,
never text of a source line the traceback quotes (a comment, a string)."""

import traceback

from timely_spark.errors import EventLogError
from timely_spark.spark.job_errors import timely_cause


def _read_part(path):
    # when this fails the user sees EventLogError: a misleading comment, not the error
    raise EventLogError(f"{path}: damaged (not Parquet)")     # EventLogError: not this either


def _traceback_of(path):
    try:
        _read_part(path)
    except EventLogError:
        return traceback.format_exc()
    raise AssertionError("no error")


def test_the_error_is_the_tracebacks_last_line_not_a_quoted_source_line():
    tb = _traceback_of("/logs/a/worker=0/part-000003.parquet")
    assert "EventLogError: not this either" in tb                 # the traceback quotes the source line
    spark = RuntimeError("org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 failed\n"
                         f"org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n{tb}"
                         "\n\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException\n")
    found = timely_cause(spark)
    assert isinstance(found, EventLogError)
    assert str(found) == "/logs/a/worker=0/part-000003.parquet: damaged (not Parquet)"


def test_the_error_quoted_in_sparks_one_line_summary():
    spark = RuntimeError("[STREAM_FAILED] Query terminated with exception: "
                         "org.apache.spark.api.python.PythonException: "
                         "'timely_spark.errors.EventLogError: /logs/b: column 'x' clashes'\n"
                         "    # EventLogError: a quoted source line")
    assert str(timely_cause(spark)) == "/logs/b: column 'x' clashes"
