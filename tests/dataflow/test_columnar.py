"""Columnar operators: exact results against pyarrow/pandas computing the same thing on the
whole input, on 1 and 2 threads and 2 processes, over several epochs."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import timely_spark as ts
from timely_spark.dataflow.operators.key_hash import destinations

RUNS = [dict(threads=1), dict(threads=2), dict(processes=2)]


def epochs_of(table: pa.Table, epochs: int) -> list:
    """The table's rows dealt into ``epochs`` epochs (epoch 2 left empty when there are more than 2)."""
    parts = [[] for _ in range(epochs)]
    for i, batch in enumerate(table.to_batches(max_chunksize=7)):
        e = i % epochs
        if epochs > 2 and e == 2:
            e = 0                        # a time with no data at all
        parts[e].append(batch)
    return parts


def run(build, inputs: list, epochs: int, **layout) -> dict:
    """Run ``build(scope, *streams) -> stream`` with each input's batches fed per epoch
    by worker 0 (empty batches included), within 30 s (60 s on processes); returns {epoch: pyarrow.Table}
    merged over workers."""
    def work(worker):
        out = []

        def dataflow(scope):
            pairs = [scope.new_input() for _ in inputs]
            build(scope, *[s for _, s in pairs]).inspect_time(lambda t, rb: out.append((t, rb)))
            return [h for h, _ in pairs]

        handles = worker.dataflow(dataflow)
        for epoch in range(epochs):
            if worker.index == 0:
                for handle, parts in zip(handles, inputs):
                    handle.send_batch(parts[epoch] + [parts[epoch][0].slice(0, 0)] if parts[epoch] else [])
            for handle in handles:
                handle.advance_to(epoch + 1)
        for handle in handles:
            handle.close()
        while worker.step():
            pass
        return [(t, pa.Table.from_batches([rb])) for t, rb in out]

    merged: dict = {}
    for part in ts.execute(work, **{"timeout": 60 if "processes" in layout else 30, **layout}):
        for t, table in part:
            merged.setdefault(t, []).append(table)
    return {t: pa.concat_tables(tables) for t, tables in merged.items()}


def rows(table, keys) -> list:
    return sorted(table.to_pylist(), key=lambda r: tuple((r[k] is None, str(r[k])) for k in keys))


def sample(n=200, seed=1) -> pa.Table:
    rng = np.random.default_rng(seed)
    keys = [None if i % 17 == 0 else f"k{v}" for i, v in enumerate(rng.integers(0, 12, n))]
    return pa.table({"key": keys, "part": rng.integers(0, 3, n), "value": rng.integers(-50, 50, n),
                     "score": rng.random(n)})


@pytest.mark.parametrize("layout", RUNS, ids=["1 thread", "2 threads", "2 processes"])
def test_group_by_per_time_matches_pyarrow(layout):
    table = sample()
    parts = epochs_of(table, 4)
    aggs = [("value", "sum"), ("value", "count"), ("score", "max"), ("value", "count_distinct")]
    got = run(lambda s, x: x.group_by(["key", "part"]).aggregate(aggs), [parts], 4, **layout)
    assert 2 not in got                  # the empty epoch emits nothing
    for epoch in range(4):
        if not parts[epoch]:
            continue
        expect = pa.Table.from_batches(parts[epoch]).group_by(["key", "part"]).aggregate(aggs)
        assert rows(got[epoch], ["key", "part"]) == rows(expect.select(got[epoch].column_names), ["key", "part"])


def added(table: pa.Table) -> list:
    """The rows a running aggregate's changelog adds (diff +1), without their diff: on an
    insert-only input, the new totals of the keys that changed."""
    return [{k: v for k, v in r.items() if k != "diff"} for r in table.to_pylist() if r["diff"] == 1]


@pytest.mark.parametrize("layout", RUNS[:2], ids=["1 thread", "2 threads"])
def test_running_totals_match_pandas_cumulative_sums(layout):
    table = sample(120)
    parts = epochs_of(table, 3)
    got = run(lambda s, x: x.group_by("key").aggregate([("value", "sum"), ("score", "mean"), ([], "count_all")],
                                                          running=True), [parts], 3, **layout)
    seen = []
    for epoch in range(3):
        now = [r for batch in parts[epoch] for r in batch.to_pylist()]
        seen += now
        expect = {}
        for key in {r["key"] for r in now}:
            mine = [r for r in seen if r["key"] == key]
            expect[key] = (sum(r["value"] for r in mine), round(sum(r["score"] for r in mine) / len(mine), 9),
                           len(mine))
        emitted = added(got[epoch]) if epoch in got else []
        actual = {r["key"]: (r["value_sum"], round(r["score_mean"], 9), r["count_all"]) for r in emitted}
        assert actual == expect and len(emitted) == len(expect)


@pytest.mark.parametrize("layout", RUNS, ids=["1 thread", "2 threads", "2 processes"])
@pytest.mark.parametrize("how,pa_how", [("inner", "inner"), ("left", "left outer"), ("semi", "left semi")])
def test_join_per_time_matches_pyarrow(layout, how, pa_how):
    left = sample(90, seed=2).select(["key", "part", "value"])
    right = sample(60, seed=3).select(["key", "part", "score"])
    lparts, rparts = epochs_of(left, 2), epochs_of(right, 2)
    got = run(lambda s, a, b: a.join(b, ["key", "part"], join_type=how), [lparts, rparts], 2, **layout)
    for epoch in range(2):
        expect = pa.Table.from_batches(lparts[epoch]).join(pa.Table.from_batches(rparts[epoch]), ["key", "part"],
                                                            join_type=pa_how)
        names = expect.column_names
        if expect.num_rows == 0:
            assert epoch not in got
        else:
            assert rows(got[epoch].select(names), names) == rows(expect, names)


def test_row_wise_operators_and_conversions():
    table = sample(50)
    parts = epochs_of(table, 2)

    def build(s, x):
        return (x.filter(pc.field("value") > 0)
                 .with_columns(double=pc.field("value") * 2, tag=lambda rb: pc.utf8_upper(rb.column("key")))
                 .select("key", "double", "tag", neg=pc.negate(pc.field("value")))
                 .rebatch(3)
                 .to_records()
                 .from_records(pa.schema([("key", pa.string()), ("double", pa.int64()), ("tag", pa.string()),
                                          ("neg", pa.int64())])))

    got = run(build, [parts], 2, threads=2)
    for epoch in range(2):
        whole = pa.Table.from_batches(parts[epoch]).filter(pc.field("value") > 0)
        expect = pa.table({"key": whole["key"], "double": pc.multiply(whole["value"], 2),
                           "tag": pc.utf8_upper(whole["key"]), "neg": pc.negate(whole["value"])})
        assert rows(got[epoch], ["key", "double"]) == rows(expect, ["key", "double"])


def test_exchange_by_routes_every_row_by_key_once():
    table = sample(300)

    def work(worker):
        seen = []
        worker.dataflow(lambda s: s.to_stream(table if worker.index == 0 else table.slice(0, 0))
                        .exchange_by(["key", "part"]).inspect(seen.append))
        while worker.step():
            pass
        return [(r["key"], r["part"], r["value"], r["score"]) for rb in seen for r in rb.to_pylist()], \
            [rb.num_rows for rb in seen]

    (a, sizes_a), (b, sizes_b) = ts.execute(work, threads=2, timeout=30)
    assert sorted(a + b, key=str) == sorted([tuple(r.values()) for r in table.to_pylist()], key=str)
    assert not {(k, p) for k, p, _, _ in a} & {(k, p) for k, p, _, _ in b}
    assert all(sizes_a) and all(sizes_b)                 # no empty pieces were sent
    nulls = [r for r in a + b if r[0] is None and r[1] == 0]
    assert nulls and (all(r in a for r in nulls) or all(r in b for r in nulls))   # one worker for a null key


def test_key_hash_is_the_same_in_another_process():
    batch = pa.record_batch({"s": ["a", "", None, "héllo", "zz" * 50], "i": [1, -2, None, 2**40, 0],
                             "d": pa.array([0, 1, 2, None, 19000], pa.date32())})
    here = destinations(batch, ["s", "i", "d"], 7).tolist()
    code = ("import pyarrow as pa; from timely_spark.dataflow.operators.key_hash import destinations; "
            "b = pa.record_batch({'s': ['a', '', None, 'héllo', 'zz' * 50], 'i': [1, -2, None, 2**40, 0], "
            "'d': pa.array([0, 1, 2, None, 19000], pa.date32())}); print(destinations(b, ['s', 'i', 'd'], 7).tolist())")
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                           env={"PYTHONHASHSEED": "123", "PATH": ""}, check=True).stdout
    assert there.strip() == str(here)
    assert len(set(destinations(pa.record_batch({"k": list(range(1000))}), ["k"], 4).tolist())) == 4


def test_a_columnar_stream_through_a_nested_loop():
    def build(scope):
        table = pa.table({"x": [1, 2, 3]})

        def loop(inner):
            handle, cycle = inner.feedback(1)
            body = inner.concatenate([scope.to_stream(table).enter(inner), cycle]).with_columns(
                x=pc.field("x") * 2)
            again = body.filter(pc.field("x") < 20)
            again.connect_loop(handle)
            return body.filter(pc.field("x") >= 20).leave()

        out = []
        scope.iterative(loop).inspect(lambda rb: out.extend(rb.column("x").to_pylist()))
        return out

    assert sorted(ts.example(build)) == [24, 32, 32]


def test_columnar_errors_name_operator_and_column():
    table = pa.table({"k": [1], "v": [2]})
    with pytest.raises(ts.WorkerError, match=r"'GroupBy'.*no column 'nope'|no column 'nope'.*"):
        ts.example(lambda s: s.to_stream(table).group_by("nope").aggregate([("v", "sum")], name="GroupBy"))
    with pytest.raises(ts.WorkerError, match="no aggregate function 'summ'"):
        ts.example(lambda s: s.to_stream(table).group_by("k").aggregate([("v", "summ")]))
    with pytest.raises(ts.WorkerError, match="'ExchangeBy' is columnar.*got int"):
        ts.example(lambda s: s.to_stream([1, 2]).exchange_by("k"))
    with pytest.raises(ts.WorkerError, match="different schemas"):
        ts.example(lambda s: s.to_stream([table.to_batches()[0], pa.record_batch({"k": ["x"], "v": [1.5]})])
                   .group_by("k").aggregate([("v", "sum")]))
    with pytest.raises(ts.WorkerError, match="'Select'.*zz"):
        ts.example(lambda s: s.to_stream(table).select("zz"))


def test_pandas_input_and_local_graph_function():
    frame = pd.DataFrame({"src": [1, 3, 5], "dst": [2, 2, 6]})
    seen = []
    ts.example(lambda s: s.to_stream(frame).to_records().inspect(seen.append))
    assert seen == [{"src": 1, "dst": 2}, {"src": 3, "dst": 2}, {"src": 5, "dst": 6}]
    result = ts.graph.connected_components(frame, workers=2, timeout=30)
    assert isinstance(result, pd.DataFrame)
    assert result.to_dict("list") == {"vertex": [1, 2, 3, 5, 6], "component": [1, 1, 1, 5, 5]}


def test_extract_gives_a_table_per_time_for_a_columnar_stream():
    table = sample(40)
    queue = ts.example(lambda s: s.to_stream(table).rebatch(9).capture())
    ((time, got),) = ts.capture.extract(queue)
    assert time == 0 and isinstance(got, pa.Table) and got.equals(table.combine_chunks())
    ((_, frame),) = ts.capture.extract(queue, as_pandas=True)
    assert isinstance(frame, pd.DataFrame) and frame["value"].tolist() == table["value"].to_pylist()


def test_running_totals_keep_the_keys_absent_from_later_times():
    """A key missing from later times keeps its total: it comes back with everything it had
    (the state remembers it), and the last time, where every key occurs, shows every total."""
    epochs = [{"key": ["a", "b", None, "c"], "value": [1, 2, 4, 8]},
              {"key": ["b"], "value": [16]},
              None,                                                # a time with no data at all
              {"key": ["a", None], "value": [32, 64]},             # c and b stay away
              {"key": ["a", "b", "c", None], "value": [0, 0, 0, 0]}]
    parts = [[pa.record_batch(e)] if e else [] for e in epochs]
    aggs = [("value", "sum"), ("value", "min"), ("value", "max"), ("value", "mean"), ("value", "count"),
            ([], "count_all")]      # sum and mean (count and mean) of one column share a partial
    frame = pd.concat([pd.DataFrame({**e, "epoch": t}) for t, e in enumerate(epochs) if e], ignore_index=True)
    for layout in RUNS[:2]:
        got = run(lambda s, x: x.group_by("key").aggregate(aggs, running=True), [parts], len(epochs), **layout)
        assert sorted(got) == [0, 1, 3, 4], f"{layout}: output at times {sorted(got)}"
        for t in sorted(got):
            upto = frame[frame["epoch"] <= t]
            present = set(frame[frame["epoch"] == t]["key"])
            totals = upto.groupby("key", dropna=False)["value"].agg(["sum", "min", "max", "mean", "count", "size"])
            expect = {None if pd.isna(k) else k: (int(r["sum"]), int(r["min"]), int(r["max"]), float(r["mean"]),
                                                  int(r["count"]), int(r["size"]))
                      for k, r in totals.iterrows() if (None if pd.isna(k) else k) in present}
            actual = {r["key"]: (r["value_sum"], r["value_min"], r["value_max"], r["value_mean"], r["value_count"],
                                 r["count_all"])
                      for r in added(got[t])}
            assert actual == expect, f"{layout}: running totals at time {t}"


def _merge_like_arrow(left: pd.DataFrame, right: pd.DataFrame, keys: list, how: str) -> pd.DataFrame:
    """pandas' merge with SQL's null keys (a null key matches nothing, as in Arrow's join)."""
    def hide_nulls(frame, side):
        frame = frame.copy()
        for k in keys:
            frame[k] = [f"<null {side}{i}>" if pd.isna(v) else v for i, v in enumerate(frame[k].astype(object))]
        return frame

    lhs, rhs = hide_nulls(left, "L"), hide_nulls(right, "R")
    if how in ("semi", "anti"):
        marked = lhs.merge(rhs[keys].drop_duplicates(), on=keys, how="left", indicator=True)
        out = marked[marked["_merge"] == ("both" if how == "semi" else "left_only")].drop(columns="_merge")
    else:
        out = lhs.merge(rhs, on=keys, how=how, suffixes=("", "_right"), sort=False)
    for k in keys:
        out[k] = [None if isinstance(v, str) and v.startswith("<null ") else v for v in out[k]]
    return out


def _plain_rows(records: list, names: list) -> list:
    def plain(v):
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return None
        return round(float(v), 9) if isinstance(v, (int, float, np.integer, np.floating)) else v
    return sorted((tuple(plain(r[n]) for n in names) for r in records), key=repr)


@pytest.mark.parametrize("layout", RUNS[:2], ids=["1 thread", "2 threads"])
@pytest.mark.parametrize("how", ["inner", "left", "right", "outer", "semi", "anti"])
def test_every_join_type_matches_pandas_merge_with_unmatched_rows_on_both_sides(layout, how):
    left = sample(90, seed=2).select(["key", "part", "value"])
    right = sample(60, seed=3).select(["key", "part", "score"])
    keys = ["key", "part"]
    lparts, rparts = epochs_of(left, 2), epochs_of(right, 2)
    for e in range(2):      # the data has what this test is about: unmatched rows on both sides, null keys
        lk = {tuple(r.values()) for b in lparts[e] for r in b.select(keys).to_pylist()}
        rk = {tuple(r.values()) for b in rparts[e] for r in b.select(keys).to_pylist()}
        assert lk - rk and rk - lk and any(k is None for k, _ in lk) and any(k is None for k, _ in rk)
    got = run(lambda s, a, b: a.join(b, keys, join_type=how), [lparts, rparts], 2, **layout)
    for epoch in range(2):
        lt, rt = pa.Table.from_batches(lparts[epoch]), pa.Table.from_batches(rparts[epoch])
        expect = _merge_like_arrow(lt.to_pandas(), rt.to_pandas(), keys, how)
        names = list(expect.columns)
        actual = got[epoch].select(names).to_pylist() if epoch in got else []
        assert _plain_rows(actual, names) == _plain_rows(expect.to_dict("records"), names), \
            f"join_type={how!r} at time {epoch}"
