"""Running joins of every kind (inner, left, right, full, semi, anti) on random changelogs
(inserts, deletes, duplicates) over 22 epochs, against pandas on the folded collections at
every time, on 1 and 2 threads; and the life of an unmatched row."""

import pandas as pd
import pyarrow as pa
import pytest

import timely_spark as ts

from .test_changelog import EPOCHS, QUIET, RIGHT, SCHEMA, left_row, one_worker, random_log, right_row, run, upto

KINDS = ["inner", "left", "right", "outer", "semi", "anti"]


def normal(value):
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return None
    return int(value) if isinstance(value, (int, float)) else value


def rows_of(df: pd.DataFrame, columns: list) -> list:
    return sorted(str(tuple(normal(r[c]) for c in columns)) for r in df.to_dict("records"))


def expected(lc: pa.Table, rc: pa.Table, kind: str) -> pd.DataFrame:
    left = lc.to_pandas() if lc.num_rows else pd.DataFrame({"k": pd.Series([], "int64"), "v": []})
    right = rc.to_pandas() if rc.num_rows else pd.DataFrame({"k": pd.Series([], "int64"), "w": []})
    if kind == "semi":
        return left[left["k"].isin(right["k"])]
    if kind == "anti":
        return left[~left["k"].isin(right["k"])]
    return left.merge(right, on="k", how=kind)


@pytest.mark.parametrize("layout", [dict(threads=1), dict(threads=2)], ids=["1 thread", "2 threads"])
def test_every_running_join_matches_pandas_on_the_folded_collections_at_every_time(layout):
    left, right = random_log(11, left_row, SCHEMA), random_log(12, right_row, RIGHT)

    def build(scope, lefts, rights):
        return {kind: lefts.join(rights, "k", join_type=kind, running=True) for kind in KINDS}

    got = run(build, [left, right], **layout)
    for kind, times in got.items():
        assert QUIET not in times, f"{kind}: an epoch whose changes cancel emitted {times[QUIET].to_pylist()}"
    for t in range(EPOCHS):
        lc, rc = ts.collection(upto(left, t)), ts.collection(upto(right, t, RIGHT))
        for kind in KINDS:
            columns = ["k", "v"] if kind in ("semi", "anti") else ["k", "v", "w"]
            parts = [table for time, table in got.get(kind, {}).items() if time <= t]
            have = ts.collection(pa.concat_tables(parts, promote_options="default")) if parts else None
            have_rows = [] if have is None else rows_of(have.to_pandas(), columns)
            assert have_rows == rows_of(expected(lc, rc, kind), columns), f"{kind} join at time {t}"


def test_an_unmatched_row_is_withdrawn_at_its_first_match_and_comes_back_after_its_last():
    def work(worker):
        out = []

        def build(scope):
            (li, ls), (ri, rs) = scope.new_input(), scope.new_input()
            ls.join(rs, "k", join_type="left", running=True).inspect_time(
                lambda t, b: out.append((t, sorted(b.to_pylist(), key=str))))
            return li, ri

        li, ri = worker.dataflow(build)
        li.send_batch(pa.table({"k": [1], "v": ["a"]}))
        ri.send_batch(pa.table({"k": [2], "w": ["z"]}))
        steps = [None, pa.table({"k": [1, 1], "w": ["x", "y"]}), pa.table({"k": [1], "w": ["x"], "diff": [-1]}),
                 pa.table({"k": [1], "w": ["y"], "diff": [-1]})]
        for epoch, change in enumerate(steps):
            if change is not None:
                ri.send_batch(change)
            li.advance_to(epoch + 1)
            ri.advance_to(epoch + 1)
        li.close()
        ri.close()
        while worker.step():
            pass
        return out

    got = ts.execute(work, timeout=30)[0]
    assert got == [
        (0, [{"k": 1, "v": "a", "w": None, "diff": 1}]),
        (1, [{"k": 1, "v": "a", "w": "x", "diff": 1}, {"k": 1, "v": "a", "w": "y", "diff": 1},
             {"k": 1, "v": "a", "w": None, "diff": -1}]),
        (2, [{"k": 1, "v": "a", "w": "x", "diff": -1}]),
        (3, [{"k": 1, "v": "a", "w": "y", "diff": -1}, {"k": 1, "v": "a", "w": None, "diff": 1}])]


def test_a_semi_join_keeps_each_left_row_once_whatever_its_matches():
    epochs = [pa.table({"k": [1, 1, 2], "v": [5, 5, 6]})]
    got = one_worker(lambda s: s.join(s.map(lambda b: b.rename_columns(["k", "w"])), "k", join_type="semi",
                                      running=True), epochs)
    assert [(t, sorted(map(str, rows))) for t, rows in got] == [
        (0, ["{'k': 1, 'v': 5, 'diff': 2}", "{'k': 2, 'v': 6, 'diff': 1}"])]
