"""group_by(...).reduce(fn, schema), top_k, argmin and argmax on random changelogs (inserts,
deletes, duplicates, nulls) over 22 epochs, against pandas recomputed from scratch on the
collection at every time, on 1 and 2 threads; then bad input, named."""

import pandas as pd
import pyarrow as pa
import pytest

import timely_spark as ts

from .test_changelog import EPOCHS, QUIET, SCHEMA, fails, left_row, one_worker, random_log, run, upto

SUMS = pa.schema([("k", pa.int64()), ("total", pa.int64()), ("values", pa.int64()), ("rows", pa.int64())])


def sums(rows: pa.Table, keys: list) -> pa.Table:
    """A user's reduction: per key the sum and count of v and the number of rows."""
    out = rows.group_by(keys).aggregate([("v", "sum"), ("v", "count"), ([], "count_all")])
    return out.select(keys + ["v_sum", "v_count", "count_all"]).rename_columns(SUMS.names)


def frame(table: pa.Table) -> pd.DataFrame:
    return table.to_pandas() if table.num_rows else pd.DataFrame({"k": [], "v": []})


def rows_of(df: pd.DataFrame) -> list:
    return sorted(str({c: (None if pd.isna(v) else int(v)) for c, v in r.items()}) for r in df.to_dict("records"))


def expected(df: pd.DataFrame) -> dict:
    """Each operator's output on the collection ``df``, by pandas from scratch."""
    if not len(df):
        return {name: [] for name in ("sums", "top2", "argmin", "argmax")}
    grouped = df.groupby("k", dropna=False)
    totals = pd.DataFrame({"total": grouped["v"].sum(min_count=1), "values": grouped["v"].count(),
                           "rows": grouped.size()}).reset_index()
    desc = df.sort_values(["k", "v"], ascending=[True, False], na_position="last")
    asc = df.sort_values(["k", "v"], ascending=[True, True], na_position="last")
    return {"sums": rows_of(totals), "top2": rows_of(desc.groupby("k").head(2)),
            "argmin": rows_of(asc.groupby("k").head(1)), "argmax": rows_of(desc.groupby("k").head(1))}


@pytest.mark.parametrize("layout", [dict(threads=1), dict(threads=2)], ids=["1 thread", "2 threads"])
def test_reductions_on_random_changelogs_match_pandas_from_scratch_at_every_time(layout):
    log = random_log(5, left_row, SCHEMA)

    def build(scope, changes):
        by_key = changes.group_by("k")
        return {"sums": by_key.reduce(sums, SUMS), "top2": by_key.top_k(2, [("v", "descending")]),
                "argmin": by_key.argmin("v"), "argmax": by_key.argmax("v")}

    got = run(build, [log], **layout)
    for name, times in got.items():
        assert QUIET not in times, f"{name}: an epoch whose changes cancel emitted {times[QUIET].to_pylist()}"
        assert 3 not in times, f"{name}: an empty epoch emitted something"
    for t in range(EPOCHS):
        want = expected(frame(ts.collection(upto(log, t))))
        for name in want:
            schema = SUMS if name == "sums" else SCHEMA.remove(2)
            have = ts.collection(upto(got.get(name, {}), t, schema.append(pa.field("diff", pa.int64()))))
            assert rows_of(frame(have)) == want[name], f"{name} at time {t}"


def test_a_withdrawn_top_row_is_replaced_by_the_next_and_comes_back():
    epochs = [pa.table({"k": ["a"] * 3, "v": [5, 9, 7]}), pa.table({"k": ["a"], "v": [9], "diff": [-1]}),
              pa.table({"k": ["a"], "v": [9]})]
    got = one_worker(lambda s: s.group_by("k").top_k(2, [("v", "descending")]), epochs)
    assert [(t, sorted((r["v"], r["diff"]) for r in rows)) for t, rows in got] == [
        (0, [(7, 1), (9, 1)]), (1, [(5, 1), (9, -1)]), (2, [(5, -1), (9, 1)])]


def test_a_reduce_that_returns_rows_of_a_key_it_was_not_given_names_operator_time_key_and_row():
    def stray(rows, keys):
        return pa.concat_tables([rows, pa.table({"k": ["zz"], "v": [0]})])
    fails(ts.ChangelogError, r"operator 'Reduce' at time 1: the reduce function returned a row for key "
                             r"\{'k': 'zz'\}, which it was not given .*row \{'k': 'zz', 'v': 0\}",
          lambda s: s.group_by("k").reduce(lambda r, k: stray(r, k) if 3 in r["v"].to_pylist() else r),
          [pa.table({"k": ["a", "b"], "v": [1, 2]}), pa.table({"k": ["a"], "v": [3]})])


def test_a_reduce_whose_rows_do_not_fit_the_schema_names_operator_time_key_and_row():
    schema = pa.schema([("k", pa.string()), ("n", pa.int64())])
    fails(ts.ChangelogError, r"operator 'Reduce' at time 0: the reduce function returned rows \(k: string, v: "
                             r"string\) that do not fit the schema \(k: string, n: int64\); first: key "
                             r"\{'k': 'a'\}, row \{'k': 'a', 'v': 'x'\}",
          lambda s: s.group_by("k").reduce(lambda r, k: pa.table({"k": ["a"], "v": ["x"]}), schema),
          [pa.table({"k": ["a"], "v": [1]})])


def test_a_withdrawal_of_a_row_never_added_names_operator_time_and_row():
    fails(ts.ChangelogError, r"operator 'TopK' at time 1: row \{'k': 'a', 'v': 4\} has count -1",
          lambda s: s.group_by("k").top_k(1, "v"),
          [pa.table({"k": ["a"], "v": [1]}), pa.table({"k": ["a"], "v": [4], "diff": [-1]})])


def test_a_reduce_accepts_pandas_and_refuses_a_schema_without_its_keys():
    schema = pa.schema([("k", pa.string()), ("n", pa.int64())])
    got = one_worker(lambda s: s.group_by("k").reduce(
        lambda rows, keys: rows.to_pandas().groupby(keys).size().rename("n").reset_index(), schema),
        [pa.table({"k": ["a", "a"], "v": [1, 2]})])
    assert got == [(0, [{"k": "a", "n": 2, "diff": 1}])]
    with pytest.raises(ts.WorkerError, match="operator 'Reduce': the output schema must have the key columns"):
        ts.example(lambda s: s.to_stream(pa.table({"k": [1]})).group_by("k").reduce(lambda r, k: r,
                                                                                    pa.schema([("n", pa.int64())])))
