"""ts.graph.components, the incremental stream form: a changelog of edges in, the
changelog of (vertex, component) out; folded at every time, it equals the batch form
(and a union-find reference) on the edges held at that time."""

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import timely_spark as ts
from timely_spark.errors import ChangelogError, GraphInputError, WorkerError
from timely_spark.graph import GRAPH_LOG, components, connected_components, union_find

from .changelogs import collection, edge_table, feed, fold_upto, run_epochs


def changelog(seed: int, epochs: int = 22) -> list:
    """Per epoch a list of (src, dst, diff) rows: random inserts and withdrawals with
    duplicates and self-loops, a long path broken in the middle (and mended), a star
    losing its hub, a vertex losing its last edge."""
    rng = np.random.default_rng(seed)
    held: Counter = Counter()
    out = []
    path = [int(v) for v in rng.permutation(np.arange(1000, 1200))]        # 200 vertices: the search path
    for t in range(epochs):
        rows = []

        def add(a, b, d=1):
            rows.append((int(a), int(b), d))
            held[(int(a), int(b))] += d

        for _ in range(int(rng.integers(0, 25))):
            if any(c > 0 and e[0] < 1000 for e, c in held.items()) and rng.random() < 0.35:
                edges = sorted(e for e, c in held.items() if c > 0 and e[0] < 1000)   # the random part's
                e = edges[int(rng.integers(0, len(edges)))]
                add(*e, -1)
            else:
                a = int(rng.integers(0, 60))
                add(a, a if rng.random() < 0.1 else int(rng.integers(0, 60)))
        if t == 1:
            for a, b in zip(path[:-1], path[1:]):
                add(a, b)
            add(path[3], path[4])                                         # a duplicate
        if t == 5:
            add(path[99], path[100], -1)                                  # broken in the middle
        if t == 9:
            add(path[4], path[3])                                         # a duplicate, reversed
            add(path[3], path[4], -1)                                     # still connected by one copy
        if t == 12:
            add(path[99], path[100])                                      # mended
        if t == 2:
            for leaf in range(2001, 2101):
                add(2000, leaf)
            add(2000, 2000)
        if t == 7:
            for leaf in range(2001, 2101):
                add(2000, leaf, -1)                                        # the star loses its hub
        if t == 15:
            add(2000, 2000, -1)                                            # the hub's last edge
        if t == 16:
            add(2050, 2051)
            add(2050, 2051, -1)                                            # in and out at one time
        out.append(rows)
    return out


def held_at(log: list, t: int) -> list:
    """The edges held after time ``t``, one ``(src, dst)`` pair per copy."""
    edges = collection([edge_table(rows) for rows in log], t, ["src", "dst"])
    return list(zip(edges["src"].to_pylist(), edges["dst"].to_pylist()))


def run(log: list, threads: int = 1, processes: int = 1) -> dict:
    """``{time: output table}`` of ``components`` fed ``log`` (lists of (src, dst, diff))."""
    return run_epochs([edge_table(rows) for rows in log], components, threads=threads, processes=processes)


def rows_at(per_time: dict, t: int) -> list:
    """The output rows at time ``t`` as (vertex, component, diff) tuples."""
    table = per_time.get(t)
    return [] if table is None else list(zip(*(table[c].to_pylist() for c in ("vertex", "component", "diff"))))


@pytest.mark.parametrize("layout", [dict(threads=1), dict(threads=2), dict(threads=1, processes=2)])
def test_folded_changes_equal_the_components_at_every_time(layout):
    log = changelog(seed=sum(layout.values()))
    per_time = run(log, **layout)
    for t in range(len(log)):
        state = {v: c for (v,), (c,) in fold_upto(per_time, t, ["vertex"]).items()}
        assert state == union_find(held_at(log, t)), f"time {t}"
    final = held_at(log, len(log) - 1)
    batch = connected_components(pa.table({"src": [a for a, _ in final], "dst": [b for _, b in final]}))
    assert state == dict(zip(batch["vertex"].to_pylist(), batch["component"].to_pylist()))


def test_shapes_change_only_what_they_touch():
    log = changelog(seed=3)
    per_time = run(log)
    rows = {t: Counter((v, d) for v, _, d in rows_at(per_time, t)) for t in range(len(log))}
    star = set(range(2001, 2101))
    assert star <= {v for v, d in rows[7] if d == -1}                    # the leaves leave
    assert 2000 not in {v for v, _ in rows[7]}                           # the hub keeps its self-loop
    assert (2000, -1) in rows[15]                                        # ... until it goes too
    assert all(v not in star for v, _ in rows[16])                       # in and out at one time: nothing


def expected_rows(before: dict, after: dict) -> Counter:
    rows: Counter = Counter()
    for v in set(before) | set(after):
        if before.get(v) != after.get(v):
            if v in before:
                rows[(v, before[v], -1)] += 1
            if v in after:
                rows[(v, after[v], 1)] += 1
    return rows


def test_output_is_exactly_the_changed_rows():
    log = changelog(seed=4)
    per_time = run(log, threads=2)
    for t in range(len(log)):
        got = Counter(rows_at(per_time, t))
        before = union_find(held_at(log, t - 1)) if t else {}
        assert got == expected_rows(before, union_find(held_at(log, t))), f"time {t}"


def test_no_op_epoch_and_edge_inside_a_component_emit_nothing():
    log = [[(1, 2, 1), (2, 3, 1), (7, 8, 1)],
           [(1, 3, 1)],                                   # inside the component
           [(1, 2, 1)],                                   # a second copy
           [(5, 6, 1), (5, 6, -1)],                       # in and out at one time
           [(1, 2, -1)],                                  # one copy of two withdrawn
           [(3, 1, 1), (1, 3, -1)],                       # the other direction replaces it
           [(9, 9, 1)]]
    per_time = run(log)
    assert sorted(per_time) == [0, 6]
    assert per_time[6].to_pydict() == {"vertex": [9], "component": [9], "diff": [1]}


def test_merge_emits_only_the_relabelled_side():
    big = [(i, i + 1, 1) for i in range(10, 60)]
    per_time = run([big, [(3, 4, 1)], [(4, 10, 1)], [(70, 10, 1)]])
    relabelled = per_time[2].to_pydict()         # {3, 4} keeps its label 3
    assert sorted(relabelled["vertex"]) == sorted(list(range(10, 61)) * 2)
    assert sorted(zip(relabelled["component"], relabelled["diff"])) == [(3, 1)] * 51 + [(10, -1)] * 51
    moved = per_time[3].to_pydict()
    assert moved == {"vertex": [70], "component": [3], "diff": [1]}       # the newcomer only


def folded_matches_union_find(log: list, **layout) -> None:
    """Fold the operator's output on ``log`` at every time and compare with union-find."""
    per_time = run(log, **layout)
    held: Counter = Counter()
    for t, rows in enumerate(log):
        for a, b, d in rows:
            held[(a, b)] += d
        state = {v: c for (v,), (c,) in fold_upto(per_time, t, ["vertex"]).items()}
        assert state == union_find([e for e, n in held.items() if n > 0]), f"time {t}"


@settings(max_examples=15, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12), st.booleans()), max_size=12),
                min_size=1, max_size=8),
       st.integers(1, 4), st.sampled_from([0, -6, -(2 ** 63) + 1, 2 ** 63 - 13]))
def test_folded_changes_match_union_find_on_any_changelog(epochs, threads, offset):
    """Any valid changelog on 1 to 4 workers, ids negative or near the int64 limits."""
    held: Counter = Counter()
    log = []
    for rows in epochs:
        out = []
        for a, b, withdraw in rows:
            a, b = a + offset, b + offset
            d = -1 if withdraw and held[(a, b)] > 0 else 1
            held[(a, b)] += d
            out.append((a, b, d))
        log.append(out)
    folded_matches_union_find(log, threads=threads)


def test_bad_input_names_operator_time_and_row():
    with pytest.raises(WorkerError) as info:
        run([[(1, 2, 1)], [(1, 2, -1), (2, 1, -1)]])
    assert isinstance(info.value.cause, ChangelogError)
    assert "'Components' at time 1" in str(info.value.cause) and "src=2, dst=1" in str(info.value.cause)

    def build(scope):
        inp, edges = scope.new_input()
        components(edges)
        inp.send(pa.record_batch({"src": [1], "dst": [2], "diff": [1.0]}))
        inp.close()

    with pytest.raises(WorkerError) as info:
        ts.example(build)
    assert isinstance(info.value.cause, ChangelogError)
    assert "'Components' at time 0" in str(info.value.cause) and "integer" in str(info.value.cause)

    def strings(scope):                            # ids of two types
        inp, edges = scope.new_input()
        components(edges)
        inp.send(pa.record_batch({"src": ["a"], "dst": [2]}))
        inp.close()

    with pytest.raises(WorkerError) as info:
        ts.example(strings)
    assert isinstance(info.value.cause, GraphInputError) and info.value.cause.what == "src"


def test_vertex_leaving_and_coming_back():
    log = [[(1, 2, 1), (100, 5, 1)] + [(i, i + 1, 1) for i in range(2, 30)],
           [(100, 5, 1)],                               # a second copy: no change
           [(100, 5, -1)],
           [(100, 5, -1)],                              # 100 loses its last edge
           [(1, 2, -1)],                                # so does 1, which named the component
           [(1, 9, 1)],                                 # both come back elsewhere
           [(9, 100, 1), (100, 100, 1)]]
    folded_matches_union_find(log, threads=2)


def spread_changelog(seed: int) -> list:
    """Shapes that stress the distribution: a giant component whose vertices hash to every
    worker, built in one epoch, then grown, cut and mended; a long path crossing the
    workers at nearly every edge, cut in two places and joined to the giant component.
    The first epoch is big enough for the distributed contraction, the others take the
    small-epoch broadcast; the last cuts a piece off and grows it in the same epoch."""
    rng = np.random.default_rng(seed)
    n = 400
    giant = [(int(a), int(b), 1) for a, b in zip(rng.integers(0, n, 3 * n), rng.integers(0, n, 3 * n))]
    giant += [(int(a), int(b), 1) for a, b in zip(rng.permutation(n)[:-1], rng.permutation(n)[1:])]
    ids = [int(v) for v in rng.permutation(np.arange(5000, 5600))]
    path = list(zip(ids[:-1], ids[1:]))
    log = [giant + [(a, b, 1) for a, b in path]]
    log.append([(path[100][0], path[100][1], -1), (path[400][0], path[400][1], -1)])   # the path in three
    log.append([(ids[0], 7, 1)])                                                       # one end joins the giant
    live = [e for e in Counter((a, b) for a, b, _ in giant).items()]
    cut = [(a, b, -c) for (a, b), c in live[:40]]
    log.append(cut + [(path[100][0], path[100][1], 1)])
    log.append([(ids[-1], 8000, 1), (8000, 8001, 1)] + [(a, b, -d) for a, b, d in cut[:10]])
    log.append([(path[500][0], path[500][1], -1), (ids[550], 9000, 1), (ids[520], ids[530], 1)])  # cut, and
    return log                                                                    # the piece cut off grows


@pytest.mark.parametrize("layout", [dict(threads=4), dict(threads=2, processes=2)])
def test_giant_component_and_long_path_spread_over_workers(layout):
    folded_matches_union_find(spread_changelog(seed=7), **layout)


def state_per_round(epochs: list, peers: int) -> dict:
    """``{(operator, time): rows held per worker}`` from the GRAPH_LOG stream of a run of
    ``components`` on ``peers`` threads fed ``epochs`` (tables, each worker a slice)."""
    def work(worker):
        events: list = []
        worker.log_register().insert(GRAPH_LOG, events.extend)

        def dataflow(scope):
            inp, edges = scope.new_input()
            components(edges)
            return inp

        feed(worker, worker.dataflow(dataflow), epochs)
        worker.log_register().flush()
        return events

    rows: dict = {}
    for events in ts.execute(work, threads=peers, timeout=120):
        for e in events:
            rows.setdefault((e["name"], e["frontier"]), [0] * peers)[e["worker"]] += e["count"]
    return rows


def test_stream_state_is_spread_evenly_over_four_workers():
    rng = np.random.default_rng(11)
    n = 1500
    first = edge_table([(int(a), int(b), 1) for a, b in zip(rng.integers(0, n, 2 * n), rng.integers(0, n, 2 * n))])
    epochs = [first]
    for _ in range(3):
        gone = first.take(rng.choice(first.num_rows, 50, replace=False))
        gone = gone.set_column(2, "diff", pa.array(np.full(50, -1, np.int64)))
        epochs.append(pa.concat_tables([gone, edge_table([(int(a), int(b), 1) for a, b in
                                                          zip(rng.integers(0, n, 200), rng.integers(0, n, 200))])]))
        first = pa.concat_tables([first, epochs[-1].filter(pa.compute.equal(epochs[-1]["diff"], 1))])
        first = first.filter(pa.compute.invert(pa.compute.is_in(
            pa.compute.binary_join_element_wise(pa.compute.cast(first["src"], pa.string()),
                                                pa.compute.cast(first["dst"], pa.string()), "-"),
            value_set=pa.compute.binary_join_element_wise(pa.compute.cast(gone["src"], pa.string()),
                                                          pa.compute.cast(gone["dst"], pa.string()), "-"))))
    rows = state_per_round(epochs, 4)
    assert "Components" in {name for name, _ in rows}
    checked = 0
    for (name, time), per_worker in rows.items():
        mean = sum(per_worker) / 4
        kept = name in ("Components", "ComponentsEdges")     # the state kept between epochs
        # a round of a few rows cannot be split evenly by hashing; and the contraction's last
        # rounds run only on the workers that still have unresolved vertices
        if mean >= 100 and (kept or min(per_worker) > 0):
            checked += kept
            assert max(per_worker) <= 1.5 * mean, (name, time, per_worker)
            if kept:                                                                           # no gathering
                assert per_worker[0] <= 1.25 * sum(per_worker[1:]) / 3, (name, time, per_worker)
    assert checked >= 8


def test_state_of_vertices_that_left_is_dropped(monkeypatch):
    """A stream whose vertices come and go (each epoch a new path, the last one withdrawn)
    keeps state for the vertices in the graph, not for every vertex ever seen: the dense
    id tables are compacted once they double (here from 64 ids)."""
    monkeypatch.setattr("timely_spark.graph.component_labels.COMPACT_AT", 64)
    epochs, last = [], []
    for e in range(40):
        path = [(e * 100 + i, e * 100 + i + 1, 1) for i in range(20)]
        epochs.append(edge_table(path + [(a, b, -1) for a, b, _ in last]))
        last = path
    rows = state_per_round(epochs, 2)
    final: dict = {}
    for (name, (time,)), per_worker in rows.items():
        if getattr(time, "outer", time) == len(epochs) - 1:
            final[name] = max(final.get(name, 0), *per_worker)
    # about 21 vertices and 20 edges live; 40 epochs of them without compaction
    assert final["Components"] < 400 and final["ComponentsEdges"] < 400, final
    folded_matches_union_find([[(a, b, d) for a, b, d in zip(*(t[c].to_pylist() for c in ("src", "dst", "diff")))]
                               for t in epochs[:12]], threads=3)


def test_dense_ids_stay_a_few_times_the_live_ones_under_a_window_of_churn(monkeypatch):
    """Records that each live ``WINDOW`` epochs (as the streaming example's: a record, its
    own email, a phone shared by five records), new ids every epoch: the dense id tables
    are rebuilt once at least half their ids are dead, counted -- not only once they
    passed a bound on the ids in use (the state's rows) that live edges keep far above it."""
    monkeypatch.setattr("timely_spark.graph.component_labels.COMPACT_AT", 64)
    window, per_epoch, epochs = 10, 50, 150
    live = window * per_epoch * 2 + window * per_epoch // 5           # records, emails, phones
    batches = []
    for e in range(epochs):
        new = np.arange(e * per_epoch, (e + 1) * per_epoch, dtype=np.int64)
        old = new - window * per_epoch
        ids = np.concatenate([new, old[old >= 0]])
        diff = np.where(ids >= e * per_epoch, 1, -1)
        src, dst = np.concatenate([ids, ids]), np.concatenate([ids + 10 ** 9, ids // 5 + 2 * 10 ** 9])
        batches.append(pa.table({"src": src, "dst": dst, "diff": np.concatenate([diff, diff])}))
    rows = state_per_round(batches, 1)
    peak: dict = {}
    for (name, (time,)), per_worker in rows.items():
        if getattr(time, "outer", time) >= epochs // 2:
            peak[name] = max(peak.get(name, 0), *per_worker)
    # the state's rows: the dense ids (a few times the live ones) and the index keys (live
    # and dead ones a merge has not dropped yet); without the counted check, the ids of
    # 8,000 vertices that left were kept by the labels (18,420 rows) and the edge counts (7,090)
    assert peak["Components"] < 8 * live and peak["ComponentsEdges"] < 6 * live, (peak, live)


@pytest.mark.parametrize("before, after, budget", [(3, 2, 2), (1, 4, 1 << 16)])
def test_restored_mid_stream_into_another_worker_count(monkeypatch, before, after, budget):
    """Cut after epoch 2 (edge counts and labels keyed by hash), restored into another
    worker count: the output equals an uninterrupted run's, through splits into three
    pieces, a vertex leaving and coming back, the smallest vertex splitting off (with
    the split search forced to fall back to recomputes, or not), and id-table rebuilds."""
    from ..state.opstate_harness import cut_and_restore

    monkeypatch.setattr("timely_spark.graph.component_labels.COMPACT_AT", 8)
    monkeypatch.setattr("timely_spark.graph.component_labels.SEARCH_BUDGET", budget)
    path = [(i, i + 1, 1) for i in range(10, 22)]
    log = [path + [(1, 2, 1), (2, 3, 1), (3, 1, 1), (4, 5, 1), (-7, 2 ** 62, 1)],
           [(15, 16, -1), (18, 19, -1), (4, 5, -1), (-7, 2 ** 62, -1)],        # the path in three; 4, 5 leave
           [(5, 4, 1), (1, 10, 1), (30, 31, 1), (31, 30, 1)],
           [(1, 2, -1), (3, 1, -1), (30, 31, -1)],                            # 1 splits off its triangle
           [(2, 16, 1), (10, 11, -1), (31, 30, -1), (-7, 2 ** 62, 1)],
           []]
    epochs = [[pa.record_batch({"src": pa.array([r[0] for r in rows], pa.int64()),
                                "dst": pa.array([r[1] for r in rows], pa.int64()),
                                "diff": pa.array([r[2] for r in rows], pa.int64())})] for rows in log]
    whole, got = cut_and_restore(lambda s, x: components(x), epochs, 3, before, after)
    assert whole and got == whole


@pytest.mark.parametrize("direct_below", [64, 1 << 20])
def test_folded_changes_equal_union_find_with_prefix_starts_and_direct_ids_at_small_sizes(monkeypatch,
                                                                                          direct_below):
    """The index levels keep their prefixes' starts from 8 keys on, and the dense positions
    give up the direct array when an id passes 64 (or keep it): the changelog of the first
    test (paths cut and mended, a star losing its hub, duplicates) still folds to union-find."""
    monkeypatch.setattr("timely_spark.graph.key_index.STARTS_AT", 8)
    monkeypatch.setattr("timely_spark.graph.ids.positions.DIRECT_BELOW", direct_below)
    monkeypatch.setattr("timely_spark.graph.ids.positions.DIRECT_PER_ID", 1)
    folded_matches_union_find(changelog(seed=4), threads=2)


def rounds_per_epoch(monkeypatch, log: list, threads: int) -> dict:
    """``{epoch: the loop's rounds at which some worker's labels ran}`` of ``components`` on ``log``;
    asserts its output folds to union-find at every time."""
    from timely_spark.graph.component_labels import ComponentLabels

    seen: dict = {}
    step = ComponentLabels.step

    def counted(self, time, *inputs):
        seen.setdefault(time[0], set()).add(time[1])
        return step(self, time, *inputs)

    monkeypatch.setattr(ComponentLabels, "step", counted)
    folded_matches_union_find(log, threads=threads)
    return seen


def test_an_epoch_of_insertions_takes_two_rounds(monkeypatch):
    """Round 0 guesses that nothing is withdrawn and sends its stars at once, so an epoch of
    insertions only ends in round 1; a withdrawal on one of the workers drops the guess."""
    path = [(v, v + 1, 1) for v in range(0, 40, 2)]
    log = [path, [(v, v + 2, 1) for v in range(1, 30, 4)], [(0, 1, -1), (5, 9, 1), (40, 41, 1)]]
    rounds = rounds_per_epoch(monkeypatch, log, threads=2)
    assert rounds[0] == {0, 1} and rounds[1] == {0, 1}
    assert max(rounds[2]) > 1                                  # the withdrawal's search


def test_a_piece_that_splits_off_is_relabelled_in_the_round_that_finds_it_closed(monkeypatch):
    """The search broadcasts each group's smallest vertex as it grows, so the round that finds
    a piece closed relabels it and builds the contraction: the path 0..9 cut between 4 and 5
    takes 7 rounds (the seeds; 4 levels a side; a round to see the ends add nothing, one to
    learn it).  Round 0's contraction of an epoch's insertions holds when the search beside it
    splits nothing off (a vertex leaving is no split): it takes no round after the search's;
    when a piece splits off, the contraction is built again from the new labels, a round later."""
    log = [[(v, v + 1, 1) for v in range(9)] + [(20, 21, 1)], [(4, 5, -1)], [(20, 21, -1)],
           [(0, 9, 1), (3, 4, -1)], [(6, 7, -1), (20, 5, 1)]]
    rounds = rounds_per_epoch(monkeypatch, log, threads=2)
    assert rounds == {0: {0, 1}, 1: set(range(7)), 2: {0, 1}, 3: {0, 1}, 4: set(range(5))}


def test_a_withdrawal_whose_ends_meet_ends_its_search_without_the_others(monkeypatch):
    """Two withdrawn edges, each on a square, the squares 40 hops apart on a path: each edge's
    ends meet around its square (the seeds; their neighbours expanded; the meeting found; learnt
    by every worker: 4 rounds), which settles the component -- every withdrawn edge's ends are
    joined again -- without the two squares' searches meeting (40 levels more); two squares and
    a triangle between them, both edges between them cut, split in three, and so do two squares
    whose joint vertex loses both its edges."""
    def square(a):
        return [(a, a + 1, 1), (a + 1, a + 2, 1), (a + 2, a + 3, 1), (a + 3, a, 1)]

    path = [(v, v + 1, 1) for v in range(200, 240)]
    graph = square(0) + square(100) + path + [(3, 200, 1), (240, 100, 1)]
    blob = [(300, 301, 1), (301, 302, 1), (302, 300, 1), (302, 400, 1), (301, 500, 1)] + square(400) + square(500)
    joint = square(600) + square(700) + [(600, 650, 1), (650, 700, 1)]
    log = [graph + blob + joint, [(0, 1, -1), (100, 101, -1)],
           [(302, 400, -1), (301, 500, -1), (600, 650, -1), (650, 700, -1)]]
    rounds = rounds_per_epoch(monkeypatch, log, threads=2)
    assert rounds[1] == set(range(4))


def test_an_expanded_vertex_does_not_visit_the_vertex_it_came_from(monkeypatch):
    """The path 0..9 cut between 4 and 5: each side's search visits its 4 other vertices once
    each (8 visits), not also back along every edge it came by (16)."""
    _, visits = search_counts(monkeypatch, [[(v, v + 1, 1) for v in range(9)], [(4, 5, -1)]], threads=2)
    assert visits[1] == 8


def search_counts(monkeypatch, log: list, threads: int) -> tuple[dict, Counter]:
    """``({epoch: rounds}, Counter({epoch: visits}))`` of ``components`` on ``log``: the rounds
    at which some worker's labels ran and the visits of its split search, as the ``"graph"``
    logging stream reports them (local hops' visits too); asserts the output folds to union-find."""
    from timely_spark.graph.component_labels import ComponentLabels

    rounds: dict = {}
    visits: Counter = Counter()
    step = ComponentLabels.step

    def counted(self, time, *inputs):
        def on_graph(events):
            for e in events:
                outer, inner = tuple(e["frontier"][0]) if e["name"] == "Components" else (None, None)
                if e["event"] == "state" and outer is not None:
                    rounds.setdefault(outer, set()).add(inner)
                elif e["event"] == "visits" and outer is not None:
                    visits[outer] += e["count"]

        if self.scope.worker.log_register().get(GRAPH_LOG) is None:
            self.scope.worker.log_register().insert(GRAPH_LOG, on_graph)
        return step(self, time, *inputs)

    monkeypatch.setattr(ComponentLabels, "step", counted)
    folded_matches_union_find(log, threads=threads)
    return rounds, visits
