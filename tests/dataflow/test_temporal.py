"""valid_during: a temporal filter on random changelogs over 22 epochs (rows with and
without bounds, withdrawn before, during and after their window), against the filter
computed from scratch on the collection at every time; 1 and 2 threads."""

import numpy as np
import pyarrow as pa
import pytest

import timely_spark as ts

from .test_changelog import EPOCHS, one_worker, run, upto

SCHEMA = pa.schema([("x", pa.int64()), ("start", pa.int64()), ("end", pa.int64()), ("diff", pa.int64())])


def windows(seed: int) -> list:
    rng = np.random.default_rng(seed)
    live: list = []
    log = []
    for epoch in range(EPOCHS):
        changes = []
        for _ in range(int(rng.integers(0, 5))):
            if live and rng.random() < 0.3:
                changes.append((*live.pop(int(rng.integers(len(live)))), -1))
            else:
                begin = None if rng.random() < 0.2 else int(rng.integers(0, EPOCHS))
                finish = None if rng.random() < 0.2 else int(rng.integers(0, EPOCHS + 3))
                row = (int(rng.integers(0, 6)), begin, finish)
                live.append(row)
                changes.append((*row, 1))
        log.append(pa.Table.from_pylist([dict(zip(SCHEMA.names, c)) for c in changes], schema=SCHEMA))
    return log


@pytest.mark.parametrize("layout", [dict(threads=1), dict(threads=2)], ids=["1 thread", "2 threads"])
def test_the_temporal_filter_equals_a_filter_from_scratch_at_every_time(layout):
    log = windows(21)
    got = run(lambda scope, rows: {"valid": rows.valid_during("start", "end")}, [log], **layout)["valid"]
    for t in range(EPOCHS + 4):
        collection = ts.collection(upto(log, min(t, EPOCHS - 1), SCHEMA))
        want = sorted(str(r) for r in collection.to_pylist()
                      if (r["start"] is None or r["start"] <= t) and (r["end"] is None or t < r["end"]))
        parts = [table for when, table in got.items() if when <= t]
        have = ts.collection(pa.concat_tables(parts)) if parts else SCHEMA.empty_table().drop_columns(["diff"])
        assert sorted(str(r) for r in have.to_pylist()) == want, f"at time {t}"


def test_a_time_column_that_is_not_an_integer_is_named():
    with pytest.raises(ts.WorkerError, match="operator 'ValidDuring' at time 0: column 'end' must hold integer"):
        one_worker(lambda s: s.valid_during("start", "end"), [pa.table({"start": [0], "end": ["x"]})])
