"""A shared arrangement (``stream.arrange(keys)``): running joins of every kind and a
reduce that read one index equal the same operators each keeping their own copy, on
random changelogs with withdrawals over 22 epochs (1 and 2 threads, 2 processes), and
the index is held once: the readers keep nothing of the arranged input."""

import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.dataflow.operators.changelog import consolidate_table
from timely_spark.errors import BuildError

from .test_changelog import EPOCHS, RIGHT, SCHEMA, left_row, random_log, right_row, run
from .test_joins import KINDS

OUT = pa.schema([("k", pa.int64()), ("n", pa.int64())])


def count(rows: pa.Table, keys: list) -> pa.Table:
    return rows.group_by(keys).aggregate([([], "count_all")]).rename_columns(keys + ["n"])


def operators(lefts, rights) -> dict:
    """Every running join kind with ``rights`` on either side, and a reduce of ``rights``
    (``rights`` a stream or one arrangement of it)."""
    out = {kind: lefts.join(rights, "k", join_type=kind, running=True) for kind in KINDS}
    out["flipped"] = (rights.join(lefts, "k", join_type="left", running=True) if isinstance(rights, ts.Stream)
                      else rights.join(lefts, "left"))
    out["reduce"] = (rights.group_by("k").reduce(count, OUT) if isinstance(rights, ts.Stream)
                     else rights.reduce(count, OUT))
    return out


def changes(table: pa.Table) -> list:
    return sorted(map(str, consolidate_table(table, "test").to_pylist()))


@pytest.mark.parametrize("layout", [dict(threads=1), dict(threads=2), dict(processes=2)],
                         ids=["1 thread", "2 threads", "2 processes"])
@pytest.mark.slow
def test_joins_and_a_reduce_reading_one_arrangement_equal_their_unshared_forms_at_every_time(layout):
    left, right = random_log(21, left_row, SCHEMA), random_log(22, right_row, RIGHT)
    shared = run(lambda scope, ls, rs: operators(ls, rs.arrange("k")), [left, right], **layout)
    alone = run(lambda scope, ls, rs: operators(ls, rs), [left, right], **layout)
    assert set(alone) == set(KINDS) | {"flipped", "reduce"}
    for name, times in alone.items():
        for t in range(EPOCHS):
            mine, want = shared.get(name, {}).get(t), times.get(t)
            assert (changes(mine) if mine is not None else []) == (changes(want) if want is not None else []), \
                f"{name} at time {t}"


def test_the_index_is_held_once_and_its_readers_keep_nothing_of_it():
    right = random_log(23, right_row, RIGHT)
    left = [pa.table({"k": [1, 2], "v": [1, 2]})] + [SCHEMA.empty_table()] * (EPOCHS - 1)
    found = []

    def build(scope, ls, rs):
        arranged = rs.arrange("k")
        found.append(arranged)
        return {"join": ls.join(arranged, "k", running=True), "flipped": arranged.join(ls),
                "reduce": arranged.reduce(count, OUT)}

    got = run(build, [left, right], threads=1)
    [arranged] = found
    held, readers = arranged.rows, [sum(s.rows for s in reader.stores) for reader in arranged.readers]
    distinct_rows = ts.collection(pa.concat_tables([t for t in right if t.num_rows])).num_rows
    emitted = sum(table.num_rows for table in got["reduce"].values())
    assert 0 < held and distinct_rows <= held
    assert len(readers) == 3
    assert readers[0] == readers[1] == 0, "a join keeps a copy of the arranged side"
    assert 0 < readers[2] <= emitted, "the reduce keeps more than the output it emitted"


def test_an_arrangement_by_other_keys_or_inside_a_loop_is_refused():
    table = pa.table({"k": [1], "v": [2]})
    with pytest.raises(ts.WorkerError) as caught:
        ts.example(lambda s: s.to_stream(table).join(s.to_stream(table).arrange("v"), "k", running=True))
    assert isinstance(caught.value.cause, BuildError)
    assert "the arrangement 'Arrange' is by ['v'], not by the keys ['k']" in str(caught.value.cause)
    with pytest.raises(ts.WorkerError, match="operator 'Arrange' keeps a collection across times"):
        ts.example(lambda s: s.iterative(lambda inner: s.to_stream(table).enter(inner).arrange("k").stream.leave()))
