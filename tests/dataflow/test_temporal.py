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


def filtered(log: list, stop_after=None):
    """A worker function: ``log``'s epochs from the restored time (0 on a fresh start) to
    the end or to ``stop_after`` (then the inputs close: a final snapshot) through
    valid_during; returns ``(restored_time, [(time, batch), ...])``."""
    def work(worker):
        out: list = []

        def dataflow(scope):
            inp, rows = scope.new_input()
            rows.valid_during("start", "end").inspect_time(lambda t, b: out.append((t, b)))
            return inp

        handle = worker.dataflow(dataflow)
        for epoch in range(worker.restored_time or 0, EPOCHS if stop_after is None else stop_after):
            handle.advance_to(epoch)
            mine = log[epoch].take(np.arange(worker.index, log[epoch].num_rows, worker.peers))
            if mine.num_rows:
                handle.send_batch(mine)
            handle.advance_to(epoch + 1)
        handle.close()
        while worker.step():
            pass
        return worker.restored_time, out
    return work


@pytest.mark.parametrize("before, after", [(2, 2), (2, 3)])
def test_a_stopped_and_restored_temporal_filter_equals_one_run(tmp_path, before, after):
    """Changes held for later times when the run stopped come back with the restore."""
    log = windows(21)
    checkpoint = str(tmp_path)
    first = ts.execute(filtered(log, stop_after=EPOCHS // 2), checkpoint=checkpoint, threads=before)
    second = ts.execute(filtered(log), checkpoint=checkpoint, threads=after)
    cut = second[0][0]
    assert cut == EPOCHS // 2
    whole = [(t, b) for _, out in ts.execute(filtered(log), threads=1) for t, b in out]
    pieces = [(t, b) for _, out in first for t, b in out if t < cut] + \
             [(t, b) for _, out in second for t, b in out]
    assert ts.state.read_snapshot(checkpoint, "ValidDuring").num_rows > 0     # changes held past the cut
    for t in range(EPOCHS + 4):
        def upto_t(parts):
            tables = [b for u, b in parts if u <= t and b.num_rows]
            return sorted(map(str, ts.collection(pa.Table.from_batches(tables)).to_pylist())) if tables else []
        assert upto_t(pieces) == upto_t(whole), f"at time {t}"
