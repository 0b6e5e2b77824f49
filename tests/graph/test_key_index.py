"""KeyIndex against a dict and a plain filter of the keys held: prefix scans on levels large
enough to keep their prefixes' starts and on small ones, after updates that empty keys;
unsorted sets, adds with peeks and empty calls."""

import numpy as np

from timely_spark.graph.ids.positions import DenseIds
from timely_spark.graph.key_index import STARTS_AT, KeyIndex


def test_prefix_scans_equal_a_filter_of_the_keys_held_in_large_and_small_levels():
    rng = np.random.default_rng(3)
    index, held = KeyIndex(empty=0), {}
    for size in (3 * STARTS_AT, STARTS_AT // 4, 500, 7):
        a, b = rng.integers(0, 2 * STARTS_AT, size), rng.integers(0, 1 << 31, size)
        keys = np.unique((a << 32) | b)
        values = rng.integers(0, 3, len(keys))                  # 0: absent (dropped or never there)
        index.set(keys, values)
        held.update(zip(keys.tolist(), values.tolist()))
        present = np.array(sorted(k for k, v in held.items() if v != 0), np.int64)
        prefixes = np.unique(np.concatenate([rng.integers(0, 2 * STARTS_AT, 300), present[:50] >> 32,
                                             [0, 4 * STARTS_AT, 1 << 30]]))         # beyond every level's largest
        got = np.sort(index.with_prefix(prefixes))
        assert got.tolist() == present[np.isin(present >> 32, prefixes)].tolist()
        asked = np.concatenate([keys[:200], rng.integers(0, 1 << 40, 200), present[-100:]])
        values, found = index.get(asked)
        assert values.tolist() == [held.get(k, 0) for k in asked.tolist()]
        assert found.tolist() == [held.get(k, 0) != 0 for k in asked.tolist()]
    assert len(index.keys) > 1 and index.starts[0] is not None and index.starts[-1] is None   # both paths ran


def test_dense_positions_stay_the_same_across_the_switch_from_the_direct_array_to_the_index():
    rng = np.random.default_rng(5)
    ids, seen = DenseIds("Components"), {}
    batches = [rng.integers(0, 5000, 300) for _ in range(5)] + [np.array([1 << 40, 7])] + \
              [rng.integers(-100, 10_000, 300) for _ in range(3)]
    for step, batch in enumerate(batches):
        for v in sorted(set(batch.tolist()) - set(seen)):            # a batch's new ids in ascending order
            seen[v] = len(seen)
        expected = [seen[v] for v in batch.tolist()]
        assert ids.dense(batch).tolist() == expected
        assert (ids.direct is None) == (step >= 5)              # the large id gave up the direct array
        probe = np.array([*batch[:20].tolist(), 123_456_789, -7_000])
        at, found = ids.get(probe, -1)
        assert at.tolist() == [seen.get(v, -1) for v in probe.tolist()]
        assert found.tolist() == [v in seen for v in probe.tolist()]
    assert ids.vid[:ids.n].tolist() == sorted(seen, key=seen.get) and len(ids) == len(seen)


def test_unsorted_sets_adds_with_peeks_and_empty_calls_agree_with_a_dict():
    rng = np.random.default_rng(5)
    index, held = KeyIndex(empty=0), {}
    for size in (3000, 1000, 400, 400, 0, 90, 1):
        keys = rng.permutation(np.unique(rng.integers(0, 5000, size)))        # unsorted, distinct
        if rng.random() < 0.5:
            values = rng.integers(0, 3, len(keys))
            index.set(keys, values)
            held.update(zip(keys.tolist(), values.tolist()))
        else:
            peek = rng.integers(0, 5000, 300)
            deltas = rng.integers(-1, 3, len(keys))
            before = dict(held)
            old, peeked = index.add_peek(keys, deltas, peek)
            assert old.tolist() == [before.get(k, 0) for k in keys.tolist()]
            assert peeked.tolist() == [before.get(k, 0) for k in peek.tolist()]
            held.update((k, before.get(k, 0) + d) for k, d in zip(keys.tolist(), deltas.tolist()))
        asked = np.arange(5000)
        assert index.get(asked)[0].tolist() == [held.get(k, 0) for k in range(5000)]
        assert index.with_prefix(np.zeros(0, np.int64)).tolist() == []
    assert len(index.keys) > 1


def test_sets_of_new_keys_search_only_the_levels_with_empty_keys_and_agree_with_a_dict():
    rng = np.random.default_rng(9)
    index, held = KeyIndex(empty=0), {}
    for size in (4000, 1500, 600, 300, 300, 120, 40, 40, 7):
        gone = [k for k, v in held.items() if v][:size // 3]            # made empty in their levels
        index.set(np.array(gone, np.int64), np.zeros(len(gone), np.int64))
        held.update((k, 0) for k in gone)
        free = np.setdiff1d(np.arange(20_000), [k for k, v in held.items() if v])
        keys = rng.permutation(np.concatenate([rng.choice(free, size, replace=False), gone[:size // 6]]))
        keys = np.unique(keys)                                           # absent, or empty in a level
        values = rng.integers(1, 4, len(keys))
        index.set(keys, values, new=True)
        held.update(zip(keys.tolist(), values.tolist()))
        assert index.get(np.arange(20_000))[0].tolist() == [held.get(k, 0) for k in range(20_000)]
        assert index.holes == [int(np.count_nonzero(v == 0)) for v in index.values]
    assert len(index.keys) > 1
