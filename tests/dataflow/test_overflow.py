"""Integer aggregates never wrap: a sum (or a count kept by diffs) past int64 is an
AggregateOverflow naming the operator, the column, the key and the time -- per time,
running, and in event-time windows -- while sums that reach the very ends of int64 are
exact."""

from __future__ import annotations

import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.errors import AggregateOverflow, WorkerError
from timely_spark.testing import collect, run_epochs

BIG = 2**62


def failure(run):
    with pytest.raises(WorkerError) as e:
        run()
    assert isinstance(e.value.cause, AggregateOverflow), e.value
    assert isinstance(e.value.cause, OverflowError) and isinstance(e.value.cause, ts.TimelyError)
    return str(e.value.cause)


def rows(k, v, t=None, diff=None):
    columns = {"k": pa.array(k), "v": pa.array(v, pa.int64())}
    if t is not None:
        columns["t"] = pa.array(t, pa.int64())
    if diff is not None:
        columns["diff"] = pa.array(diff, pa.int64())
    return pa.table(columns)


def batch(k, v, t=None, diff=None):
    return rows(k, v, t, diff).to_batches()[0]


@pytest.mark.parametrize("window, where", [
    (dict(every=10), "at time 0: the sum of column 'v' for key {'k': 'a'} is 9.22337e+18"),
    (dict(every=5, period=10), "at time 0: the sum of column 'v' for key {'window_start': -5, 'k': 'a'}"),
    (dict(gap=5), "the sum of column 'v' for key {'k': 'a'} is 9.22337e+18"),
])
def test_a_window_sum_past_int64_names_operator_column_key_and_time(window, where):
    data = rows(["a", "a", "b"], [BIG, BIG, 1], t=[1, 2, 3])
    message = failure(lambda: collect(lambda s: s.to_stream(data).group_by_window("t", keys="k", **window)
                                      .aggregate([("v", "sum")])))
    assert message.startswith("operator 'GroupByWindow'") and where in message, message


def test_a_window_sum_of_negatives_past_int64_is_refused_too():
    data = rows(["a", "a"], [-BIG, -BIG - 1], t=[1, 2])
    message = failure(lambda: collect(lambda s: s.to_stream(data).group_by_window("t", every=10)
                                      .aggregate([("v", "sum")])))
    assert "the sum of column 'v' for key {} is -9.22337e+18" in message and "window starting at 0" in message


def test_a_per_time_sum_past_int64_is_refused():
    data = rows(["a", "a"], [BIG, BIG])
    message = failure(lambda: collect(lambda s: s.to_stream(data).group_by("k").aggregate([("v", "sum")])))
    assert "operator 'Aggregate' at time 0: the sum of column 'v' for key {'k': 'a'}" in message


def test_a_running_sum_that_crosses_int64_over_two_times_is_refused_at_the_second():
    epochs = [[batch(["a", "b"], [BIG, 1])], [batch(["a"], [BIG])]]
    message = failure(lambda: run_epochs(lambda scope, s: s.group_by("k").aggregate([("v", "sum")], running=True),
                                         epochs))
    assert "operator 'RunningAggregate' at time 1: the sum of column 'v' for key {'k': 'a'}" in message


def test_a_count_pushed_past_int64_by_diffs_is_an_overflow_not_a_withdrawal():
    epochs = [[batch(["a"], [1], diff=[BIG])], [batch(["a"], [1], diff=[BIG])]]
    message = failure(lambda: run_epochs(
        lambda scope, s: s.group_by("k").aggregate([([], "count_all"), ("v", "count")], running=True), epochs))
    assert "at time 1: the sum of the rows' diffs (the count of rows) for key {'k': 'a'}" in message
    assert "withdrawn" not in message


def test_a_value_times_its_diff_past_int64_names_the_value():
    data = rows(["a"], [4], diff=[BIG])
    message = failure(lambda: collect(lambda s: s.to_stream(data).group_by("k")
                                      .aggregate([("v", "sum")], running=True)))
    assert f"at time 0: value 4 of column 'v' times its diff {BIG} is beyond int64" in message


def test_sums_that_reach_the_ends_of_int64_are_exact_everywhere():
    top, bottom = [BIG, BIG - 1], [-BIG, -BIG]                    # 2**63 - 1 and -2**63
    data = rows(["a", "a", "b", "b"], top + bottom, t=[1, 2, 3, 4])
    expected = {"a": 2**63 - 1, "b": -2**63}
    per_time = collect(lambda s: s.to_stream(data).group_by("k").aggregate([("v", "sum")]))
    assert {r["k"]: r["v_sum"] for _, rb in per_time for r in rb.to_pylist()} == expected
    windows = collect(lambda s: s.to_stream(data).group_by_window("t", keys="k", every=10)
                      .aggregate([("v", "sum")]))
    assert {r["k"]: r["v_sum"] for _, rb in windows for r in rb.to_pylist()} == expected
    one = data.to_batches()[0]
    running = run_epochs(lambda scope, s: s.group_by("k").aggregate([("v", "sum")], running=True),
                         [[one.slice(0, 1), one.slice(2, 1)], [one.slice(1, 1), one.slice(3, 1)]])
    final = {r["k"]: r["v_sum"] for rb in running.by_time[1] for r in rb.to_pylist() if r["diff"] == 1}
    assert final == expected
