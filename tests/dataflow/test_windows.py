"""group_by_window: tumbling, sliding and session windows against a brute-force
reference, streaming with out-of-order and late rows, on 1 and 2 threads and 2
processes; every window sent once, never before the frontier proves it complete, and
as soon as it does; open windows stay bounded; bad input is a clear error."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.errors import ParameterError, WindowError, WorkerError
from timely_spark.testing import collect

RUNS = [dict(threads=1), dict(threads=2), dict(processes=2)]
EPOCH, LATENESS, EPOCHS = 10, 5, 12
KINDS = {"tumbling": dict(every=10), "sliding": dict(every=5, period=15), "session": dict(gap=7)}


def reference(rows, every=None, period=None, gap=None):
    """Sorted (window_start, window_end, key, count, sum) of ``rows`` [(x, k, v)], by brute force."""
    groups = defaultdict(list)
    if gap is None:
        period = period or every
        for x, k, v in rows:
            s = x - x % every
            while s > x - period:
                groups[(s, s + period, k)].append(v)
                s -= every
    else:
        by_key = defaultdict(list)
        for x, k, v in rows:
            by_key[k].append((x, v))
        for k, xs in by_key.items():
            xs.sort()
            start = last = xs[0][0]
            vs = []
            for x, v in xs:
                if x - last > gap:
                    groups[(start, last + gap, k)] = vs
                    start, vs = x, []
                vs.append(v)
                last = x
            groups[(start, last + gap, k)] = vs
    return sorted(((s, e, k, len(vs), sum(vs)) for (s, e, k), vs in groups.items()), key=str)


def epoch_rows(seed):
    """Per epoch e: rows (x, k, v) with x >= 10e - 5 (on time or out of order within the
    lateness), a few late ones (x < 10e - 5), null keys, rows on window boundaries."""
    rng = np.random.default_rng(seed)
    epochs = []
    for e in range(EPOCHS):
        n = int(rng.integers(3, 9))
        xs = EPOCH * e + rng.integers(-LATENESS, EPOCH, n)
        xs[0] = EPOCH * e                                             # on a boundary
        if e and e % 4 == 0:
            xs[-1] = EPOCH * e - LATENESS - int(rng.integers(1, 15))   # late
        if e == 7:
            xs[:] = EPOCH * e + EPOCH - 1                             # a quiet stretch: empty windows around
        keys = rng.choice(np.array(["a", "b", None], dtype=object), n)
        epochs.append([(int(x), k, int(v)) for x, k, v in zip(xs, keys, rng.integers(0, 100, n))])
    return epochs


def table(rows):
    return pa.table({"t": pa.array([r[0] for r in rows], pa.int64()), "k": pa.array([r[1] for r in rows], pa.string()),
                     "v": pa.array([r[2] for r in rows], pa.int64())})


def stream_windows(params, layout, seed=1):
    """Feed ``epoch_rows`` over epochs (row i by worker i % peers); returns every worker's
    (window rows, late rows, violations of 'not before complete', of 'as soon as', late_rows)."""
    epochs = epoch_rows(seed)
    session = "gap" in params

    def work(w):
        sent, late, early, slow = [], [], [], []
        advanced = {}                                     # shared between the threads of a process

        def bound_now():
            return EPOCH * min(advanced.values()) - LATENESS

        def check(rb):
            rows = rb.to_pylist()
            for r in rows:
                end, b = r["window_end"], bound_now()
                if end > b or (session and end == b):
                    early.append((r, b))
            sent.extend(rows)

        def build(s):
            inp, rows = s.new_input()
            windows = rows.group_by_window("t", keys="k", allowed_lateness=LATENESS, epoch=EPOCH, late="output",
                                           **params)
            windows.aggregate([([], "count_all"), ("v", "sum")]).inspect(check)
            windows.late.inspect(lambda rb: late.extend(rb.to_pylist()))
            return inp, windows

        inp, windows = w.dataflow(build)
        for e, rows in enumerate(epochs):
            inp.send_batch(table([r for i, r in enumerate(rows) if i % w.peers == w.index]))
            advanced[w.index] = e + 1
            inp.advance_to(e + 1)
            if w.peers == 1:      # as soon as complete: every window the bound closes is sent, without more input
                b = EPOCH * (e + 1) - LATENESS
                on_time = [r for rs in epochs[:e + 1] for r in rs if r not in late_rows(epochs)]
                due = {(s, k) for s, end, k, *_ in reference(on_time, **params)
                       if end < b or (end == b and not session)}
                w.step_while(lambda: not due <= {(r["window_start"], r["k"]) for r in sent}, timeout=10)
                slow.extend(due - {(r["window_start"], r["k"]) for r in sent})
        advanced[w.index] = math.inf                      # the input ends: every window may close
        inp.close()
        while w.step():
            pass
        return sent, late, early, slow, windows.late_rows

    return ts.execute(work, timeout=60, **layout)


def late_rows(epochs):
    return [r for e, rows in enumerate(epochs) for r in rows if r[0] < EPOCH * e - LATENESS]


@pytest.mark.parametrize("layout", RUNS, ids=["1 thread", "2 threads", "2 processes"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_streaming_windows_are_exact_once_and_on_time(kind, layout):
    params = KINDS[kind]
    epochs = epoch_rows(1)
    late = late_rows(epochs)
    assert late, "the data must have late rows"
    on_time = [r for rows in epochs for r in rows if r not in late]
    results = stream_windows(params, layout)
    sent = [r for s, *_ in results for r in s]
    got = sorted(((r["window_start"], r["window_end"], r["k"], r["count_all"], r["v_sum"]) for r in sent), key=str)
    assert got == reference(on_time, **params)            # exact, and no window twice
    assert len({(r["window_start"], r["k"]) for r in sent}) == len(sent)
    assert sorted((r["t"], r["k"], r["v"]) for _, lt, *_ in results for r in lt) == sorted(late)
    assert sum(counted for *_, counted in results) == len(late)     # every late row sent is counted too
    assert [x for _, _, early, *_ in results for x in early] == []  # never before the frontier allows
    assert [x for _, _, _, slow, _ in results for x in slow] == []  # as soon as it allows


@pytest.mark.parametrize("kind", list(KINDS))
def test_batch_windows_match_the_reference_on_timestamps_and_close_at_the_end(kind):
    """No epoch: windows close when the input ends; on a timestamp column with timedeltas."""
    rng = np.random.default_rng(5)
    xs = rng.integers(0, 400, 300)
    rows = [(int(x), k, int(v)) for x, k, v in zip(xs, rng.choice(np.array(["a", "b", None], object), 300),
                                                    rng.integers(0, 9, 300))]
    origin = datetime(2024, 1, 1, tzinfo=timezone.utc)
    data = table(rows).set_column(0, "t", pa.array([origin + timedelta(seconds=x) for x, *_ in rows],
                                                   pa.timestamp("us", "UTC")))
    params = {k: timedelta(seconds=v) for k, v in KINDS[kind].items()}
    out = [r for _, r in collect(lambda s: s.to_stream(data if s.index == 0 else [])
                                 .group_by_window("t", keys=["k"], **params)
                                 .aggregate([([], "count_all"), ("v", "sum")]).to_records(), threads=2)]
    assert {type(r["window_start"]) for r in out} == {datetime}
    got = [(int((r["window_start"] - origin).total_seconds()), int((r["window_end"] - origin).total_seconds()),
            r["k"], r["count_all"], r["v_sum"]) for r in out]
    assert sorted(got, key=str) == reference(rows, **KINDS[kind])


def test_logical_times_as_event_time_buckets_close_each_window_at_its_end():
    """Case (a): rows at logical time t have event times in [10t, 10t+10); a 20-wide
    window closes as soon as the input is advanced past its last bucket."""
    def work(w):
        sent, seen = [], []

        def build(s):
            inp, rows = s.new_input()
            windows = rows.group_by_window("t", every=20, epoch=10)
            windows.aggregate([([], "count_all")]).inspect(lambda rb: sent.extend(rb["window_start"].to_pylist()))
            return inp, rows.probe()

        inp, probe = w.dataflow(build)
        for bucket in range(6):
            inp.send_batch(pa.table({"t": [10 * bucket + 3]}))
            inp.advance_to(bucket + 1)
            w.step_while(lambda: probe.less_than(bucket + 1) or len(sent) < (bucket + 1) // 2, timeout=10)
            seen.append(list(sent))
        return seen

    assert ts.execute(work)[0] == [[], [0], [0], [0, 20], [0, 20], [0, 20, 40]]


@pytest.mark.parametrize("kind", ["sliding", "session"])
def test_open_windows_stay_bounded_over_a_long_run(kind):
    """2000 epochs of short windows: the windows held open never exceed a few."""
    params = {"sliding": dict(every=2, period=6), "session": dict(gap=3)}[kind]

    def work(w):
        most = 0

        def build(s):
            inp, rows = s.new_input()
            windows = rows.group_by_window("t", keys="k", epoch=1, **params)
            windows.aggregate([("v", "sum")])
            return inp, windows

        inp, windows = w.dataflow(build)
        for e in range(2000):
            gap = 5 if kind == "session" and e % 7 == 0 else 0       # sessions end now and then
            inp.send_batch(pa.table({"t": [e + gap], "k": [e % 3], "v": [1]}))
            inp.advance_to(e + 1)
            w.step()
            most = max(most, windows.open_windows)
        return most

    assert ts.execute(work)[0] <= 10


@pytest.mark.parametrize("late", ["drop", "output"])
def test_late_rows_are_counted_whether_dropped_or_sent_to_the_late_stream(late):
    """``late_rows`` counts every late row: dropped (the default) or sent to ``.late``."""
    def work(w):
        def build(s):
            inp, rows = s.new_input()
            windows = rows.group_by_window("t", every=10, epoch=10, **({} if late == "drop" else {"late": late}))
            sums = windows.aggregate([("t", "count")]).to_records()
            got, sent_late = [], []
            sums.inspect(got.append)
            if late == "output":
                windows.late.inspect(lambda rb: sent_late.extend(rb.column("t").to_pylist()))
            return inp, windows, got, sent_late

        inp, windows, got, sent_late = w.dataflow(build)
        inp.send_batch(pa.table({"t": [1, 2]}))
        inp.advance_to(3)
        inp.send_batch(pa.table({"t": [5, 31, 7]}))     # 5, 7 < 30: late at time 3
        inp.close()
        while w.step():
            pass
        return windows.late_rows, sorted(sent_late), sorted((r["window_start"], r["t_count"]) for r in got)

    assert ts.execute(work)[0] == (2, [5, 7] if late == "output" else [], [(0, 2), (30, 1)])


def run_on(data, **params):
    return collect(lambda s: s.to_stream(data).group_by_window(**params)
                              .aggregate([([], "count_all")]))


@pytest.mark.parametrize("params, parameter", [
    (dict(time_column="t", every=0), "every"),
    (dict(time_column="t", every=-5), "every"),
    (dict(time_column="t", every=timedelta(0)), "every"),
    (dict(time_column="t", every=5, period=2), "period"),
    (dict(time_column="t", gap=-1), "gap"),
    (dict(time_column="t", every=5, gap=3), "gap"),
    (dict(time_column="t"), "every"),
    (dict(time_column="t", every=5, allowed_lateness=-1), "allowed_lateness"),
    (dict(time_column="t", every=5, late="keep"), "late"),
    (dict(time_column="t", every=5, allowed_lateness=3), "allowed_lateness"),     # no epoch: no effect
])
def test_bad_parameters_name_the_parameter(params, parameter):
    with pytest.raises(WorkerError) as e:
        run_on(pa.table({"t": [1]}), **params)
    assert isinstance(e.value.cause, ParameterError) and e.value.cause.parameter == parameter


@pytest.mark.parametrize("column, message", [
    (pa.array([1, None], pa.int64()), r"time column 't' has 1 null value\(s\) at time 0"),
    (pa.array(["x", "y"]), r"time column 't' is string; event time must be a timestamp or an integer"),
    (pa.array([1.5, 2.0]), r"time column 't' is double"),
])
def test_bad_time_columns_are_window_errors_naming_the_column(column, message):
    with pytest.raises(WorkerError, match=message) as e:
        run_on(pa.table({"t": column}), time_column="t", every=5)
    assert e.value.operator == "GroupByWindow" and isinstance(e.value.cause, WindowError)


def test_a_timedelta_on_an_integer_column_names_the_parameter():
    with pytest.raises(WorkerError, match=r"every=datetime.timedelta\(seconds=5\) is a timedelta but time column 't'"):
        run_on(pa.table({"t": [1]}), time_column="t", every=timedelta(seconds=5))


def test_panes_fed_many_small_batches_aggregate_the_same():
    """A pane receiving more batches than WINDOW_PANE_BATCHES combines them (twice here)."""
    rng = np.random.default_rng(8)
    rows = [(int(x), k, int(v)) for x, k, v in zip(rng.integers(0, 40, 400), rng.choice(["a", "b"], 400),
                                                    rng.integers(0, 50, 400))]
    out = [r for _, r in collect(lambda s: s.to_stream(table(rows)).rebatch(5)
                                 .group_by_window("t", keys="k", every=10, period=20)
                                 .aggregate([([], "count_all"), ("v", "sum")]).to_records())]
    got = sorted(((r["window_start"], r["window_end"], r["k"], r["count_all"], r["v_sum"]) for r in out), key=str)
    assert got == reference(rows, every=10, period=20)


def test_late_stream_needs_late_output_and_aggregate_runs_once():
    from timely_spark.errors import BuildError

    def build(s):
        windows = s.to_stream(pa.table({"t": [1]})).group_by_window("t", every=5)
        with pytest.raises(BuildError, match="late='output'"):
            windows.late
        windows.aggregate([([], "count_all")])
        with pytest.raises(BuildError, match="already called"):
            windows.aggregate([([], "count_all")])
        return s.to_stream([])

    collect(build)


@pytest.mark.parametrize("kind", list(KINDS))
def test_windows_inside_iterative_close_at_the_end_with_product_times(kind):
    """Product times (inside ``iterative``): no epoch, or an epoch function, closes the
    windows when the input ends, exactly; an epoch duration (which multiplies int
    times) is a ParameterError naming it when the dataflow is built."""
    rng = np.random.default_rng(4)
    keys = rng.choice(np.array(["a", None], object), 80)
    rows = [(int(x), k, int(v)) for x, k, v in zip(rng.integers(0, 60, 80), keys, rng.integers(0, 9, 80))]

    def windows(epoch):
        return [r for _, r in collect(lambda s: s.iterative(
            lambda inner: s.to_stream(table(rows) if s.index == 0 else []).enter(inner)
            .group_by_window("t", keys="k", epoch=epoch, **KINDS[kind])
            .aggregate([([], "count_all"), ("v", "sum")]).leave()).to_records(), threads=2)]

    for epoch in (None, lambda t: -100):
        got = sorted(((r["window_start"], r["window_end"], r["k"], r["count_all"], r["v_sum"]) for r in windows(epoch)),
                     key=str)
        assert got == reference(rows, **KINDS[kind])
    with pytest.raises(WorkerError) as e:
        windows(10)
    assert isinstance(e.value.cause, ParameterError) and e.value.cause.parameter == "epoch"


def test_sliding_windows_whose_period_is_not_a_multiple_of_every_stream_exactly():
    """every=4, period=10: panes of gcd 2; out-of-order and late rows, on time."""
    params = dict(every=4, period=10)
    epochs = epoch_rows(2)
    on_time = [r for rows in epochs for r in rows if r not in late_rows(epochs)]
    [(sent, _, early, slow, counted)] = stream_windows(params, dict(threads=1), seed=2)
    got = sorted(((r["window_start"], r["window_end"], r["k"], r["count_all"], r["v_sum"]) for r in sent), key=str)
    assert got == reference(on_time, **params) and early == [] and slow == []
    assert counted == len(late_rows(epochs))


@pytest.mark.parametrize("unit, tz, every", [("s", "Asia/Kolkata", timedelta(hours=1)),
                                             ("ms", None, timedelta(milliseconds=1500)),
                                             ("ns", "America/New_York", timedelta(minutes=1, microseconds=1))])
def test_timestamps_of_any_unit_and_time_zone_align_windows_on_the_unix_epoch(unit, tz, every):
    """Windows start at multiples of ``every`` since 1970-01-01 UTC whatever the unit and
    zone (as Spark's ``window``); the bounds keep the column's type."""
    per_unit = {"s": 1, "ms": 10**3, "ns": 10**9}[unit]
    n = int(every.total_seconds() * per_unit) if unit != "ns" else (60 * 10**6 + 1) * 1000
    xs = [0, n - 1, n, 5 * n + 7, -1, 1_700_000_000 * per_unit + 3]
    column = pa.array(xs, pa.timestamp(unit, tz))
    out = [r for _, r in collect(lambda s: s.to_stream(pa.table({"t": column}))
                                 .group_by_window("t", every=every).aggregate([([], "count_all")]).to_records())]
    want = sorted({(x - x % n, x - x % n + n) for x in xs})
    got = sorted((r["window_start"], r["window_end"]) for r in out)
    as_ints = pa.array([w for pair in got for w in pair], pa.timestamp(unit, tz)).cast(pa.int64()).to_pylist()
    assert list(zip(as_ints[::2], as_ints[1::2])) == want and sum(r["count_all"] for r in out) == len(xs)


def test_a_length_that_is_not_a_whole_number_of_the_column_unit_names_the_parameter():
    with pytest.raises(WorkerError, match=r"period=.* is not a whole number of s \(the unit of time column 't'\)"):
        run_on(pa.table({"t": pa.array([1], pa.timestamp("s"))}), time_column="t", every=timedelta(seconds=1),
               period=timedelta(milliseconds=1500))


@pytest.mark.timeout(60)
def test_sliding_windows_with_a_tiny_common_pane_close_in_time_proportional_to_the_rows():
    """every=10**6, period=10**9 + 1: panes of gcd 1, a billion pane slots per window;
    closing a window looks only at the panes that hold rows (it used to walk every slot)."""
    rng = np.random.default_rng(3)
    rows = [(int(x), "a", int(v)) for x, v in zip(rng.integers(0, 10**7, 40), rng.integers(0, 9, 40))]
    out = [r for _, r in collect(lambda s: s.to_stream(table(rows))
                                 .group_by_window("t", keys="k", every=10**6, period=10**9 + 1)
                                 .aggregate([([], "count_all"), ("v", "sum")]).to_records())]
    got = sorted(((r["window_start"], r["window_end"], r["k"], r["count_all"], r["v_sum"]) for r in out), key=str)
    assert got == reference(rows, every=10**6, period=10**9 + 1)


@pytest.mark.parametrize("layout", [dict(threads=1), dict(threads=2)])
def test_a_window_is_sent_at_the_time_that_proved_it_complete_and_holds_nothing_earlier(layout):
    """epoch=10, allowed_lateness=5: a 20-wide window [s, s+20) is sent at the least
    time t with 10t - 5 >= s + 20, a session [first, last + 12) at the least t with
    10t - 5 > last + 12 -- not at its rows' earliest time; and a session open for the
    whole run (key "a") does not keep the frontier of the output (a probe after it)
    from passing each time as soon as the input has."""
    def work(w):
        out: list = []

        def build(s):
            inp, rows = s.new_input()
            tumbling = rows.group_by_window("t", every=20, keys="k", epoch=10, allowed_lateness=5)
            session = rows.group_by_window("t", gap=12, keys="k", epoch=10, allowed_lateness=5, name="Sessions")
            probes = []
            for kind, windowed in (("tumbling", tumbling), ("session", session)):
                result = windowed.aggregate([([], "count_all")]).inspect_time(
                    lambda t, rb, kind=kind: out.extend((kind, t, r["window_start"], r["k"]) for r in rb.to_pylist()))
                probes.append(result.probe())
            return inp, probes

        inp, probes = w.dataflow(build)
        for e in range(6):
            if w.index == 0:                  # "a" every time (one session throughout), "b" at time 1 only
                inp.send_batch(pa.table({"t": [10 * e + 2] + ([10 * e + 4] if e == 1 else []),
                                         "k": ["a"] + (["b"] if e == 1 else [])}))
            inp.advance_to(e + 1)
            w.step_while(lambda: any(p.less_than(e + 1) for p in probes), timeout=20)
        return out

    got = sorted(r for out in ts.execute(work, timeout=60, **layout) for r in out)
    # tumbling [0, 20): t = 3 (25 >= 20); [20, 40): t = 5; the rest when the input ends (at
    # their own proof times, 7 for [40, 60)); sessions: "b" [14, 26): 10t - 5 > 26 -> t = 4;
    # "a" [2, 64) when the input ends: 10t - 5 > 64 -> t = 7
    assert got == [("session", 4, 14, "b"), ("session", 7, 2, "a"),
                   ("tumbling", 3, 0, "a"), ("tumbling", 3, 0, "b"), ("tumbling", 5, 20, "a"),
                   ("tumbling", 7, 40, "a")]


@pytest.mark.parametrize("params, parameter", [
    (dict(every=timedelta.max), "every"),                          # past int64 microseconds
    (dict(every=timedelta(seconds=1), epoch=timedelta.max), "epoch"),
    (dict(gap=timedelta(days=200_000_000)), "gap"),
])
def test_a_length_past_int64_of_the_column_unit_names_the_parameter(params, parameter):
    with pytest.raises(WorkerError, match="longer than an int64 of us") as e:
        run_on(pa.table({"t": pa.array([1], pa.timestamp("us"))}), time_column="t", **params)
    assert isinstance(e.value.cause, ParameterError) and e.value.cause.parameter == parameter


def test_an_int_length_past_int64_names_the_parameter():
    with pytest.raises(WorkerError, match=r"every=36893488147419103232 does not fit an int64"):
        run_on(pa.table({"t": [1]}), time_column="t", every=2**65)


@pytest.mark.parametrize("every, period", [(timedelta(microseconds=1), timedelta(hours=1)), (1, 10**9)])
def test_sliding_windows_with_too_many_windows_per_row_are_refused(every, period):
    from timely_spark.dataflow.operators.window_spec import MAX_WINDOWS_PER_ROW

    t = pa.table({"t": pa.array([1], pa.timestamp("us") if isinstance(every, timedelta) else pa.int64())})
    with pytest.raises(WorkerError, match=f"over the limit of {MAX_WINDOWS_PER_ROW}") as e:
        run_on(t, time_column="t", every=every, period=period)
    assert isinstance(e.value.cause, ParameterError) and e.value.cause.parameter == "period"
    at_limit = run_on(pa.table({"t": [5]}), time_column="t", every=1, period=MAX_WINDOWS_PER_ROW)
    assert sum(rb.num_rows for _, rb in at_limit) == MAX_WINDOWS_PER_ROW


@pytest.mark.parametrize("params, x", [
    (dict(every=10), 2**63 - 5),                     # the window [2**63 - 8, 2**63 + 2) ends past int64
    (dict(every=10), -2**63 + 3),                    # the window starts at -2**63 - 5
    (dict(every=10, period=30), 2**63 - 25),         # the latest window ends at 2**63 - 28 + 30
    (dict(gap=10), 2**63 - 5),                       # the session ends at 2**63 + 5
])
def test_an_event_time_whose_windows_do_not_fit_int64_is_refused_naming_the_row(params, x):
    data = pa.table({"t": pa.array([1, x], pa.int64()), "v": [10, 20]})
    with pytest.raises(WorkerError, match=rf"row 1 at time 0 \({{'t': {x}, 'v': 20}}\) has event time {x}") as e:
        run_on(data, time_column="t", **params)
    assert isinstance(e.value.cause, WindowError)


def test_event_times_at_the_edges_of_int64_whose_windows_fit_are_windowed():
    lo, hi = -2**63 + 8, 2**63 - 8 - 1                # every=10: [-2**63 + 8, ...) and [..., 2**63 - 8)
    data = pa.table({"t": pa.array([lo, hi], pa.int64())})
    got = sorted((r["window_start"], r["window_end"], r["count_all"])
                 for _, rb in run_on(data, time_column="t", every=10) for r in rb.to_pylist())
    assert got == [(lo, lo + 10, 1), (hi - 9, hi + 1, 1)]
