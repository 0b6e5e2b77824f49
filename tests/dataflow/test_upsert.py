"""upsert: random insert/update/delete feeds against pandas (the latest record per key up to
each time, ``drop_duplicates(keep="last")``), on 1 and 2 threads and 2 processes; state cut
and restored into another worker count; bad input."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import timely_spark as ts
from timely_spark.errors import ChangelogError, WorkerError

from ..state.opstate_harness import cut_and_restore
from .test_changelog import EPOCHS
from .test_changelog import run as run_changelogs

RUNS = [dict(threads=1), dict(threads=2), dict(processes=2)]
FEED_EPOCHS = 15              # of the random feed (the runner deals EPOCHS: empty ones after)
SCHEMA = pa.schema([("id", pa.string()), ("seq", pa.int64()), ("name", pa.string()), ("amount", pa.float64()),
                    ("deleted", pa.bool_())])


def random_feed(seed: int, epochs: int = FEED_EPOCHS) -> list:
    """One table of records per epoch: inserts, updates (several per key, the sequence
    values of a key distinct within an epoch, shuffled), deletes (of live and of unknown
    keys), an update equal to the current row, and an empty epoch."""
    rng = np.random.default_rng(seed)
    feed = []
    for epoch in range(epochs):
        rows = []
        if epoch != 4:
            n = int(rng.integers(1, 25))
            ids = [f"k{int(i)}" for i in rng.integers(0, 12, n)]
            seqs = rng.permutation(1000)[:n]
            for i, s in zip(ids, seqs):
                rows.append({"id": i, "seq": int(s), "name": str(rng.choice(["x", "y", "z"])),
                             "amount": None if rng.random() < 0.1 else float(rng.integers(0, 3)),
                             "deleted": bool(rng.random() < 0.25)})
        feed.append(pa.Table.from_pylist(rows, schema=SCHEMA))
    return feed


def expected(feed: list, t: int) -> list:
    """The view at time t, by pandas: the last record per key by (time, seq); deletes drop the key."""
    frames = [f.to_pandas().assign(time=e) for e, f in enumerate(feed[:t + 1]) if f.num_rows]
    df = pd.concat(frames).sort_values(["time", "seq"]).drop_duplicates("id", keep="last")
    df = df[~df["deleted"]].drop(columns=["deleted", "time"])
    return sorted(map(str, pa.Table.from_pandas(df, preserve_index=False).to_pylist()))


def run(feed: list, **layout) -> dict:
    """{time: table} of the upsert's output; each epoch's records dealt between the workers."""
    padded = feed + [SCHEMA.empty_table()] * (EPOCHS - len(feed))
    out = run_changelogs(lambda scope, records: {"upsert": records.upsert("id", sequence_by="seq", delete="deleted")},
                         [padded], **layout)
    return out.get("upsert", {})


@pytest.mark.parametrize("layout", RUNS, ids=["1 thread", "2 threads", "2 processes"])
def test_upsert_matches_pandas_latest_per_key_at_every_time(layout):
    feed = random_feed(7)
    got = run(feed, **layout)
    assert 4 not in got, "an empty epoch emitted something"
    changes = []
    for t in range(FEED_EPOCHS):
        if t in got:
            assert got[t].column_names == ["id", "seq", "name", "amount", "diff"]
            changes.append(got[t])
        view = ts.collection(pa.concat_tables(changes)) if changes else SCHEMA.empty_table()
        assert sorted(map(str, view.to_pylist())) == expected(feed, t), f"the view at time {t}"
        assert view.num_rows == len(set(view["id"].to_pylist())), f"a key twice at time {t}"


def test_an_update_equal_to_the_row_emits_nothing_and_a_delete_of_an_unknown_key_neither():
    feed = [pa.Table.from_pylist(rows, schema=SCHEMA) for rows in (
        [{"id": "a", "seq": 1, "name": "x", "amount": 1.0, "deleted": False}],
        [{"id": "a", "seq": 1, "name": "x", "amount": 1.0, "deleted": False},
         {"id": "b", "seq": 5, "name": "x", "amount": 1.0, "deleted": True}],
    )]
    assert list(run(feed)) == [0]


@pytest.mark.parametrize("seed, before, after", [(1, 2, 3), (2, 3, 2), (3, 1, 2)])
def test_upsert_state_is_cut_and_restored_into_another_worker_count(seed, before, after):
    feed = [t.to_batches() or [] for t in random_feed(seed, 8)]
    whole, got = cut_and_restore(lambda s, x: x.upsert("id", sequence_by="seq", delete="deleted"),
                                 feed, cut=4, before=before, after=after)
    assert whole
    assert got == whole


def _one(tables, **kw):
    def work(worker):
        def build(scope):
            inp, records = scope.new_input()
            records.upsert("id", **kw)
            return inp
        inp = worker.dataflow(build)
        for t in tables:
            inp.send_batch(t)
        inp.close()
        while worker.step():
            pass
    ts.execute(work)


def test_bad_input_names_the_key_and_the_column():
    with pytest.raises(WorkerError, match=r"key \{'id': 'a'\} has two records with sequence 3"):
        _one([pa.table({"id": ["a", "b", "a"], "seq": [3, 3, 3]})], sequence_by="seq")
    with pytest.raises(WorkerError, match="no column 'seq'"):
        _one([pa.table({"id": ["a"]})], sequence_by="seq")
    with pytest.raises(WorkerError, match="'deleted' must be boolean"):
        _one([pa.table({"id": ["a"], "deleted": [1]})], delete="deleted")
    with pytest.raises(WorkerError, match="not a changelog"):
        _one([pa.table({"id": ["a"], "diff": [1]})])
    with pytest.raises(WorkerError, match="column 'tags' is nested"):
        _one([pa.table({"id": ["a"], "tags": [["x"]]})])
    with pytest.raises(WorkerError, match="key column 'id' holds null"):
        _one([pa.table({"id": ["a", None]})])
    with pytest.raises(WorkerError, match="sequence_by must name a column that is not a key"):
        ts.example(lambda s: s.to_stream(pa.table({"id": [1]})).upsert("id", sequence_by="id"))
    assert issubclass(ChangelogError, ts.TimelyError)
