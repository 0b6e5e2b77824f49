"""Changelogs in, changes out: consolidate, distinct, running aggregates and running joins on
random changelogs (inserts, deletes, duplicates) over 22 epochs, against pyarrow computing
the same thing from scratch on the collection at every time; on 1 and 2 threads and 2
processes.  Then the table-level helpers (property-based) and bad input."""

import re

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import timely_spark as ts
from timely_spark.dataflow.operators.arrangement import SMALL_LEVELS, Arrangement
from timely_spark.dataflow.operators.changelog import consolidate_table

RUNS = [dict(threads=1), dict(threads=2), dict(processes=2)]
SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("diff", pa.int64())])
RIGHT = pa.schema([("k", pa.int64()), ("w", pa.string()), ("diff", pa.int64())])
AGGS = [("v", "sum"), ("v", "count"), ("v", "min"), ("v", "max"), ("v", "mean"), ([], "count_all")]
EPOCHS = 22
QUIET = 7              # an epoch whose changes cancel: every operator must emit nothing at it


def random_log(seed: int, row, schema: pa.Schema, epochs: int = EPOCHS) -> list:
    """One table of changes per epoch: inserts (some duplicated, some +2), deletions of rows
    the collection holds, an empty epoch, and epoch QUIET where an insert and its deletion cancel."""
    rng = np.random.default_rng(seed)
    live: list = []
    log = []
    for epoch in range(epochs):
        changes = []
        if epoch == QUIET:
            r = row(rng)
            changes = [(*r, 1), (*r, -1)]
        elif epoch != 3:
            for _ in range(int(rng.integers(1, 9))):
                if live and rng.random() < 0.4:
                    changes.append((*live.pop(int(rng.integers(len(live)))), -1))
                else:
                    r = row(rng)
                    copies = 2 if rng.random() < 0.2 else 1
                    live.extend([r] * copies)
                    changes.append((*r, copies))
                    if rng.random() < 0.15:                    # the same row again, as its own change
                        live.append(r)
                        changes.append((*r, 1))
        log.append(pa.Table.from_pylist([dict(zip(schema.names, c)) for c in changes], schema=schema))
    return log


def left_row(rng):
    return int(rng.integers(0, 4)), (None if rng.random() < 0.1 else int(rng.integers(-5, 6)))


def right_row(rng):
    return int(rng.integers(0, 5)), str(rng.choice(["x", "y"]))


def run(build, logs: list, timeout=None, **layout) -> dict:
    """Run ``build(scope, *streams) -> {name: stream}``; each epoch's changes are dealt
    between the workers (a row may be added on one worker and withdrawn on another).
    Returns {name: {epoch: table}}; ``timeout`` bounds the run (default 30 s, 60 with processes)."""
    timeout = {} if timeout is None else {"timeout": timeout}
    def work(worker):
        out: list = []

        def dataflow(scope):
            pairs = [scope.new_input() for _ in logs]
            for name, stream in build(scope, *[s for _, s in pairs]).items():
                stream.inspect_time(lambda t, rb, name=name: out.append((name, t, rb)))
            return [h for h, _ in pairs]

        handles = worker.dataflow(dataflow)
        for epoch in range(EPOCHS):
            for handle, log in zip(handles, logs):
                mine = log[epoch].take(np.arange(worker.index, log[epoch].num_rows, worker.peers))
                if mine.num_rows:
                    handle.send_batch(mine)
                handle.advance_to(epoch + 1)
        for handle in handles:
            handle.close()
        while worker.step():
            pass
        return out

    got: dict = {}
    for part in ts.execute(work, **{"timeout": 60 if "processes" in layout else 30, **layout, **timeout}):
        for name, t, rb in part:
            got.setdefault(name, {}).setdefault(t, []).append(rb)
    return {name: {t: pa.Table.from_batches(b) for t, b in times.items()} for name, times in got.items()}


def upto(log, t: int, schema=None) -> pa.Table:
    """The changes at times <= t, one table (log: a list per epoch or a {time: table} dict)."""
    tables = [log[e] for e in range(t + 1) if (e in log if isinstance(log, dict) else True)]
    tables = [x for x in tables if x.num_rows]
    if not tables:
        return (schema or SCHEMA).empty_table()
    return pa.concat_tables(tables)


def as_rows(table: pa.Table) -> list:
    return sorted(map(str, table.to_pylist()))


@pytest.mark.parametrize("layout", RUNS, ids=["1 thread", "2 threads", "2 processes"])
def test_operators_on_random_changelogs_match_pyarrow_from_scratch(layout):
    left, right = random_log(1, left_row, SCHEMA), random_log(2, right_row, RIGHT)

    def build(scope, lefts, rights):
        return {"consolidate": lefts.consolidate(), "distinct": lefts.distinct(),
                "aggregate": lefts.group_by("k").aggregate(AGGS, running=True),
                "join": lefts.join(rights, "k", running=True)}

    got = run(build, [left, right], **layout)
    for name, times in got.items():
        assert QUIET not in times, f"{name}: an epoch whose changes cancel emitted {times[QUIET].to_pylist()}"
        assert 3 not in times, f"{name}: an empty epoch emitted something"
    for t, table in got["consolidate"].items():       # one row per distinct row, no zeros, per time
        assert as_rows(table) == as_rows(consolidate_table(left[t], "expected"))
    for t in range(EPOCHS):
        lc, rc = ts.collection(upto(left, t)), ts.collection(upto(right, t, RIGHT))
        assert as_rows(ts.collection(upto(got["consolidate"], t))) == as_rows(lc), f"consolidate at {t}"
        distinct = ts.collection(upto(got["distinct"], t, lc.schema), counts=True)
        assert set(distinct["count"].to_pylist()) <= {1}, f"distinct at {t} holds a row twice"
        assert as_rows(distinct.drop_columns(["count"])) == as_rows(ts.collection(lc, counts=True)
                                                                     .drop_columns(["count"])), f"distinct at {t}"
        aggregates = ts.collection(upto(got["aggregate"], t, pa.schema([("k", pa.int64())])))
        expect = lc.group_by("k").aggregate(AGGS) if lc.num_rows else None
        assert aggregates.num_rows == (expect.num_rows if expect is not None else 0), f"aggregate at {t}"
        if expect is not None:
            assert as_rows(aggregates) == as_rows(expect.select(aggregates.column_names)), f"aggregate at {t}"
        joined = ts.collection(upto(got["join"], t, pa.schema([("k", pa.int64())])))
        expect = ts.collection(lc.join(rc, "k", join_type="inner")) if lc.num_rows and rc.num_rows else None
        assert as_rows(joined) == (as_rows(expect.select(joined.column_names)) if expect is not None else []), \
            f"join at {t}"


def test_adding_a_row_inside_an_existing_group_with_unchanged_aggregates_emits_nothing():
    log = [pa.table({"k": [1, 1], "v": [5, 9]}), pa.table({"k": [1], "v": [7]}),
           pa.table({"k": [1], "v": [7], "diff": [-1]}), pa.table({"k": [1], "v": [5], "diff": [-1]})]

    def work(worker):
        out = []

        def dataflow(scope):
            inp, s = scope.new_input()
            s.group_by("k").aggregate([("v", "min"), ("v", "max")], running=True).inspect_time(
                lambda t, b: out.append((t, b.to_pylist())))
            return inp

        inp = worker.dataflow(dataflow)
        for epoch, table in enumerate(log):
            inp.send_batch(table)
            inp.advance_to(epoch + 1)
        inp.close()
        while worker.step():
            pass
        return out

    (out,) = ts.execute(work)
    assert out == [(0, [{"k": 1, "v_min": 5, "v_max": 9, "diff": 1}]),
                   (3, [{"k": 1, "v_min": 5, "v_max": 9, "diff": -1}, {"k": 1, "v_min": 9, "v_max": 9, "diff": 1}])]


# ---- the table-level helpers, property-based -------------------------------------------------
changes = st.lists(st.tuples(st.integers(0, 3), st.one_of(st.none(), st.integers(-3, 3)), st.integers(-2, 3)),
                   max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes)
def test_consolidate_table_sums_equal_rows_and_drops_zeros(rows):
    table = pa.Table.from_pylist([{"k": k, "v": v, "diff": d} for k, v, d in rows], schema=SCHEMA)
    out = consolidate_table(table, "Consolidate").to_pylist()
    expect: dict = {}
    for k, v, d in rows:
        expect[(k, v)] = expect.get((k, v), 0) + d
    assert sorted((str((r["k"], r["v"])), r["diff"]) for r in out) == sorted(
        (str(key), d) for key, d in expect.items() if d), "sums per row, zeros dropped"
    assert len({(r["k"], r["v"]) for r in out}) == len(out)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(0, 50), max_size=40), min_size=1, max_size=8), st.lists(st.integers(0, 60)))
def test_arrangement_gathers_exactly_the_rows_of_the_keys_asked_for(inserts, wanted):
    state = Arrangement(["k"], lambda t: consolidate_table(t, "Arrangement"))
    for keys in inserts:
        state.insert(pa.table({"k": pa.array(keys, pa.int64()), "diff": pa.array([1] * len(keys), pa.int64())}))
    got = state.gather(pa.table({"k": pa.array(wanted, pa.int64())}))
    assert len(state.levels) <= 2 + int(np.log2(1 + sum(map(len, inserts)))) + SMALL_LEVELS    # merged as it grows
    counts = {r["k"]: r["diff"] for r in consolidate_table(got, "x").to_pylist()} if got is not None else {}
    expect = {k: sum(ks.count(k) for ks in inserts) for k in set(wanted)}
    assert counts == {k: n for k, n in expect.items() if n}


# ---- ts.collection ---------------------------------------------------------------------------
def test_collection_folds_a_changelog_as_of_a_time():
    log = pa.table({"time": [0, 0, 1, 1, 2], "x": ["a", "b", "a", "c", "b"], "diff": [2, 1, -1, 1, -1]})
    assert ts.collection(log).to_pydict() == {"x": ["a", "c"]}
    assert ts.collection(log, as_of=0).to_pydict() == {"x": ["a", "a", "b"]}
    assert ts.collection(log, as_of=1, counts=True).to_pydict() == {"x": ["a", "b", "c"], "count": [1, 1, 1]}
    assert ts.collection(pa.table({"x": [3, 1, 3]})).to_pydict() == {"x": [1, 3, 3]}   # no diff: +1 each


def test_collection_names_a_row_withdrawn_more_often_than_added():
    log = pa.table({"time": [0, 1], "x": ["a", "a"], "worker": [0, 1], "diff": [1, -2]})
    with pytest.raises(ts.ChangelogError, match=r"operator 'collection': row \{'x': 'a'\} has count -1"):
        ts.collection(log)
    with pytest.raises(ts.ParameterError, match="as_of"):
        ts.collection(pa.table({"x": [1]}), as_of=3)


# ---- bad input -------------------------------------------------------------------------------
def fails(error, match, build, epochs):
    """``one_worker(build, epochs)`` fails with ``error`` (the cause ts.execute reports) matching ``match``."""
    with pytest.raises(ts.WorkerError) as caught:
        one_worker(build, epochs)
    assert isinstance(caught.value.cause, error), caught.value
    assert re.search(match, str(caught.value.cause)), str(caught.value.cause)


def one_worker(build, epochs: list) -> list:
    def work(worker):
        out = []

        def dataflow(scope):
            inp, s = scope.new_input()
            build(s).inspect_time(lambda t, b: out.append((t, b.to_pylist())))
            return inp

        inp = worker.dataflow(dataflow)
        for epoch, table in enumerate(epochs):
            inp.send_batch(table)
            inp.advance_to(epoch + 1)
        inp.close()
        while worker.step():
            pass
        return out

    return ts.execute(work, timeout=30)[0]


def test_a_diff_that_is_not_an_integer_names_the_operator():
    bad = [pa.table({"x": [1], "diff": [0.5]})]
    for build, name in ((lambda s: s.consolidate(), "Consolidate"), (lambda s: s.distinct(), "Distinct"),
                        (lambda s: s.group_by("x").aggregate([([], "count_all")], running=True),
                         "RunningAggregate")):
        fails(ts.ChangelogError, f"operator '{name}': the 'diff' column must be an integer", build, bad)


def test_a_withdrawal_of_a_row_never_added_names_operator_time_and_row():
    epochs = [pa.table({"x": ["a"], "v": [1]}), pa.table({"x": ["b"], "v": [2], "diff": [-1]})]
    fails(ts.ChangelogError, r"operator 'Distinct' at time 1: row \{'x': 'b', 'v': 2\} has count -1",
          lambda s: s.distinct(), epochs)
    fails(ts.ChangelogError, r"operator 'RunningAggregate' at time 1: row \{'x': 'b'\} has count -1",
          lambda s: s.group_by("x").aggregate([("v", "sum")], running=True), epochs)
    fails(ts.ChangelogError, r"at time 1: row \{'x': 'a', 'v': 5\} has count -1",      # a value 'a' never had
          lambda s: s.group_by("x").aggregate([("v", "max")], running=True),
          [epochs[0], pa.table({"x": ["a"], "v": [5], "diff": [-1]})])


def test_a_schema_that_changes_between_times_is_conformed_or_named():
    """Columns reordered, or an int32 key that becomes int64, between times: the state's
    schema is kept (no duplicate +1 from a row hashed in another column order); a schema
    that cannot be conformed is a ChangelogError naming the operator and the time."""
    epochs = [pa.table({"k": pa.array([1], pa.int32()), "v": [1]}), pa.table({"v": [2, 1], "k": [1, 1]}),
              pa.table({"v": [2], "k": [1]}), pa.table({"k": [1], "v": [1], "diff": [-2]})]
    got = one_worker(lambda s: s.distinct(), epochs)
    assert got == [(0, [{"k": 1, "v": 1, "diff": 1}]), (1, [{"k": 1, "v": 2, "diff": 1}]),
                   (3, [{"k": 1, "v": 1, "diff": -1}])]
    total = one_worker(lambda s: s.group_by("k").aggregate([("v", "sum"), ("v", "max")], running=True), epochs)
    assert total[-1] == (3, [{"k": 1, "v_sum": 6, "v_max": 2, "diff": -1},
                             {"k": 1, "v_sum": 4, "v_max": 2, "diff": 1}])
    joined = one_worker(lambda s: s.join(s, "k", running=True), epochs[:2])
    assert ts.collection(pa.Table.from_pylist([r for _, rows in joined for r in rows])).num_rows == 9
    fails(ts.ChangelogError, r"operator 'Distinct' at time 1: rows \(k: int64, diff: int64\) do not fit "
             r"the state's schema",
          lambda s: s.distinct(), [pa.table({"k": [1], "v": [1]}), pa.table({"k": [2]})])


def test_a_running_count_takes_any_column_and_a_running_sum_names_a_column_that_is_not_numbers():
    """count only counts valid values (it multiplied them by the diffs, so a string column
    failed with Arrow's 'multiply' error); sum/mean of strings is a TypeError naming the column."""
    epochs = [pa.table({"k": [1, 1], "v": ["x", None]}), pa.table({"k": [1], "v": ["x"], "diff": [-1]})]
    got = one_worker(lambda s: s.group_by("k").aggregate([("v", "count"), ("v", "min")], running=True), epochs)
    assert got == [(0, [{"k": 1, "v_count": 1, "v_min": "x", "diff": 1}]),
                   (1, [{"k": 1, "v_count": 1, "v_min": "x", "diff": -1},
                        {"k": 1, "v_count": 0, "v_min": None, "diff": 1}])]
    fails(TypeError, r"operator 'RunningAggregate' at time 0: a running sum or mean of column 'v' needs numbers",
          lambda s: s.group_by("k").aggregate([("v", "mean")], running=True), epochs)


def test_batches_with_and_without_diff_at_one_time_make_one_changelog():
    """A batch without ``diff`` counts +1 per row, whatever the other batches of its time
    carry (they failed with 'batches at time 0 have different schemas')."""
    def both(s):
        return s.concat(s.map(lambda b: with_diff(b)))

    def with_diff(b):
        return b.append_column("diff", pa.array([-1] * b.num_rows, pa.int8()))

    epochs = [pa.table({"k": ["a", "b"], "v": [1, 2]})]             # each row +1 and -1: all cancels
    for build in (lambda s: both(s).consolidate(), lambda s: both(s).distinct(),
                  lambda s: both(s).group_by("k").aggregate([("v", "sum")], running=True),
                  lambda s: both(s).join(s, "k", running=True)):
        assert one_worker(build, epochs) == []


def test_a_uint64_diff_beyond_int64_is_named_not_wrapped():
    """2**64 - 1 in a uint64 diff became -1 (a silent withdrawal)."""
    log = pa.table({"x": ["a", "a"], "diff": pa.array([1, 2**64 - 1], pa.uint64())})
    with pytest.raises(ts.ChangelogError, match="'diff' column \\(uint64\\) holds values beyond int64"):
        ts.collection(log)
    assert ts.collection(pa.table({"x": ["a"], "diff": pa.array([2], pa.uint64())})).num_rows == 2


def test_a_running_float_sum_withdraws_nan_and_infinities():
    """NaN/inf were summed into the state, so withdrawing them left the sum NaN forever (a
    from-scratch sum of the remaining [2.0] is 2.0), and a NaN aggregate was re-emitted
    (-1 and +1) whenever its key was touched without changing."""
    nan, inf = float("nan"), float("inf")
    epochs = [pa.table({"k": [1, 1, 1], "v": [nan, 2.0, inf]}), pa.table({"k": [1], "v": [nan], "diff": [-1]}),
              pa.table({"k": [1, 1], "v": [-inf, 5.0]}), pa.table({"k": [1, 1], "v": [5.0, 5.0], "diff": [1, -1]}),
              pa.table({"k": [1, 1, 1], "v": [inf, -inf, 5.0], "diff": [-1, -1, -1]})]
    got = one_worker(lambda s: s.group_by("k").aggregate([("v", "sum"), ("v", "mean")], running=True), epochs)
    now = {t: [r for r in rows if r["diff"] == 1] for t, rows in got}
    assert str(now[0]) == str([{"k": 1, "v_sum": nan, "v_mean": nan, "diff": 1}])
    assert now[1] == [{"k": 1, "v_sum": inf, "v_mean": inf, "diff": 1}]
    assert 3 not in now                          # NaN before and after: nothing changed
    assert now[4] == [{"k": 1, "v_sum": 2.0, "v_mean": 2.0, "diff": 1}]


def test_a_running_aggregate_finds_a_key_whose_type_widened():
    """A timestamp[s] key at time 1 was hashed as seconds while the state holds it as
    milliseconds: the key was not found and came out a second time (count 1 twice)."""
    epochs = [pa.table({"k": pa.array([1000], pa.timestamp("ms"))}), pa.table({"k": pa.array([1], pa.timestamp("s"))})]
    got = one_worker(lambda s: s.group_by("k").aggregate([([], "count_all")], running=True), epochs)
    assert [(t, [(r["count_all"], r["diff"]) for r in rows]) for t, rows in got] == [(0, [(1, 1)]),
                                                                                     (1, [(1, -1), (2, 1)])]


def test_a_consolidated_table_gathered_from_several_batches_is_one_chunk():
    """Rows already distinct keep their place, but leave as one batch (as a grouping gives them), not one per
    batch they were gathered from."""
    gathered = pa.Table.from_batches([pa.record_batch({"x": [1, 2], "diff": [1, 1]}),
                                      pa.record_batch({"x": [3], "diff": [1]})])
    out = consolidate_table(gathered, "Consolidate")
    assert out.column("x").num_chunks == 1 and out.to_pydict() == {"x": [1, 2, 3], "diff": [1, 1, 1]}
