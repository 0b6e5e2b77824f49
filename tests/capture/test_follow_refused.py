"""follow refuses what can never be a log, and bad parameters, at once and with the
package's own errors: a regular file, a log that never starts (after ``start_wait``),
``since`` of another type than the log's times; compact's ``grace`` and ``min_files``."""

import pytest

import timely_spark as ts
from timely_spark.capture import ParquetEventWriter
from timely_spark.capture.compact import compact
from timely_spark.capture.follow import follow
from timely_spark.errors import EventLogError, ParameterError


def follow_error(path, **options):
    with pytest.raises(ts.WorkerError) as e:
        ts.execute(lambda worker: worker.dataflow(lambda s: follow(path, s, poll=0.01, **options).probe()),
                   timeout=60)
    return e.value.cause


def test_a_regular_file_is_refused_at_once(tmp_path):
    file = tmp_path / "typo.parquet"
    file.write_bytes(b"not a log")
    cause = follow_error(str(file))
    assert isinstance(cause, EventLogError) and str(file) in str(cause) and "a file, not a directory" in str(cause)


def test_a_log_that_never_starts_is_an_error_after_start_wait(tmp_path):
    path = str(tmp_path / "never-written")
    cause = follow_error(path, start_wait=0.5)
    assert isinstance(cause, EventLogError)
    assert f"{path}: the event log has not started after 0.5 s" in str(cause)


def test_a_log_that_starts_within_start_wait_is_followed(tmp_path):
    path = str(tmp_path / "log")

    def work(worker):
        seen = []
        worker.dataflow(lambda s: follow(path, s, poll=0.01, start_wait=60).inspect(seen.append))
        for _ in range(20):                   # the log appears while the follower waits
            worker.step()
        w = ParquetEventWriter(path, flush_seconds=0.0)
        ts.example(lambda s: s.to_stream([7]).capture_into(w))
        w.close()
        while worker.step():
            pass
        return seen
    assert ts.execute(work, timeout=60) == [[7]]


@pytest.mark.parametrize("since", ["x", [1, "x"], 1.5])
def test_since_of_another_type_is_a_parameter_error(tmp_path, since):
    cause = follow_error(str(tmp_path / "log"), since=since)
    assert isinstance(cause, ParameterError) and cause.parameter == "since" and repr("x" if since != 1.5 else 1.5) \
        in str(cause)


@pytest.mark.parametrize("option", [{"grace": -5}, {"grace": float("nan")}, {"min_files": 0}, {"min_files": True}])
def test_compact_refuses_bad_parameters(tmp_path, option):
    w = ParquetEventWriter(tmp_path, flush_seconds=0.0)
    ts.example(lambda s: s.to_stream([1]).capture_into(w))
    with pytest.raises(ParameterError) as e:
        compact(tmp_path, **option)
    assert e.value.parameter == next(iter(option))
