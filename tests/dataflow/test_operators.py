"""Each operator with exact expected output (one worker unless the operator is about routing)."""

import pytest

import timely_spark as ts
from timely_spark.testing import collect


def stream_of(scope, records_by_time):
    """A stream with the given records at the given (int) times."""
    inp, stream = scope.new_input()
    for t in sorted(records_by_time):
        inp.advance_to(t)
        inp.send_batch(records_by_time[t])
    inp.close()
    return stream


def test_map_flat_map_filter_map_batches():
    assert collect(lambda s: s.to_stream(range(4)).map(lambda x: x * x)) == [(0, 0), (0, 1), (0, 4), (0, 9)]
    assert collect(lambda s: s.to_stream([1, 2]).flat_map(lambda x: [x] * x)) == [(0, 1), (0, 2), (0, 2)]
    assert collect(lambda s: s.to_stream(range(10)).filter(lambda x: x % 4 == 1)) == [(0, 1), (0, 5), (0, 9)]
    assert collect(lambda s: s.to_stream([3, 1, 2]).map_batches(lambda b: [sum(b)])) == [(0, 6)]


def test_inspect_variants_see_every_record_and_pass_it_on():
    seen, times, batches = [], [], []

    def build(s):
        return (stream_of(s, {0: ["a"], 2: ["b", "c"]})
                .inspect(seen.append)
                .inspect_time(lambda t, x: times.append((t, x)))
                .inspect_batch(lambda t, b: batches.append((t, list(b)))))

    assert collect(build) == [(0, "a"), (2, "b"), (2, "c")]
    assert seen == ["a", "b", "c"]
    assert times == [(0, "a"), (2, "b"), (2, "c")]
    assert batches == [(0, ["a"]), (2, ["b", "c"])]


def test_to_stream_sends_large_iterables_in_batches():
    sizes = []
    out = collect(lambda s: s.to_stream(range(10_000)).inspect_batch(lambda t, b: sizes.append(len(b))))
    assert sorted(x for _, x in out) == list(range(10_000))
    assert len(sizes) == 3 and sum(sizes) == 10_000


def test_concat_and_concatenate():
    assert collect(lambda s: s.to_stream([1]).concat(s.to_stream([2]))) == [(0, 1), (0, 2)]
    assert collect(lambda s: s.concatenate([s.to_stream([i]) for i in range(3)])) == [(0, 0), (0, 1), (0, 2)]


def test_partition_branch_branch_when_ok_err():
    def parts(s):
        a, b, c = s.to_stream(range(7)).partition(3, lambda x: x % 3)
        return c.map(lambda x: ("c", x))

    assert collect(parts) == [(0, ("c", 2)), (0, ("c", 5))]

    def br(s):
        no, yes = s.to_stream(range(5)).branch(lambda x: x >= 3)
        return no.map(lambda x: ("no", x)).concat(yes.map(lambda x: ("yes", x)))

    assert [x for _, x in collect(br)] == [("no", 0), ("no", 1), ("no", 2), ("yes", 3), ("yes", 4)]

    def bw(s):
        early, late = stream_of(s, {0: [1], 3: [2], 5: [3]}).branch_when(lambda t: t >= 3)
        return late

    assert collect(bw) == [(3, 2), (5, 3)]

    def oe(s):
        ok, err = s.to_stream(["4", "x", "2"]).ok_err(int)
        return ok.concat(err.map(lambda e: (e[0], type(e[1]).__name__)))

    assert sorted((x for _, x in collect(oe)), key=repr) == sorted([4, 2, ("x", "ValueError")], key=repr)

    with pytest.raises(ts.WorkerError, match="not in 0..1"):
        collect(lambda s: s.to_stream([5]).partition(2, lambda x: x)[0])


def test_delay_moves_records_to_later_times_and_rejects_earlier():
    out = collect(lambda s: s.to_stream([3, 1, 3]).delay(lambda x, t: t + x))
    assert out == [(1, 1), (3, 3), (3, 3)]
    assert collect(lambda s: s.to_stream([4, 2]).delay_total(lambda x, t: x)) == [(2, 2), (4, 4)]
    with pytest.raises(ts.WorkerError, match="Delay") as err:
        collect(lambda s: stream_of(s, {5: [1]}).delay(lambda x, t: 2))
    assert isinstance(err.value.cause, ts.CapabilityError)


def test_reclock_releases_data_at_clock_times():
    def build(s):
        data = stream_of(s, {0: ["a"], 1: ["b"], 4: ["c"]})
        clock = stream_of(s, {2: [None], 6: [None]})
        return data.reclock(clock)

    assert collect(build) == [(2, "a"), (2, "b"), (6, "c")]


def test_count_accumulate_aggregate_state_machine():
    by_time = {0: ["a", "b"], 1: ["c"], 3: ["d", "e", "f"]}
    assert collect(lambda s: stream_of(s, by_time).count()) == [(0, 2), (1, 1), (3, 3)]
    assert collect(lambda s: stream_of(s, by_time).accumulate("", lambda acc, b: acc + "".join(b))) == [
        (0, "ab"), (1, "c"), (3, "def")]

    def agg(s):
        return (stream_of(s, {0: [("x", 1), ("y", 2), ("x", 3)], 1: [("x", 10)]})
                .aggregate(lambda k, v, acc: (acc or 0) + v, lambda k, acc: (k, acc)))

    assert collect(agg) == [(0, ("x", 4)), (0, ("y", 2)), (1, ("x", 10))]

    def fold(key, value, state):
        total = (state or 0) + value
        return (None if total >= 5 else total), [(key, total)]

    def sm(s):
        return stream_of(s, {0: [("k", 2)], 1: [("k", 2)], 2: [("k", 2), ("j", 1)], 3: [("k", 1)]}).state_machine(fold)

    # the state of "k" resets once it reaches 5 or more
    assert collect(sm) == [(0, ("k", 2)), (1, ("k", 4)), (2, ("j", 1)), (2, ("k", 6)), (3, ("k", 1))]


def test_generic_unary_binary_and_sink():
    def counter(cap, info):
        held = {"cap": cap, "n": 0}

        def logic(input, output):
            for t, batch in input:
                held["n"] += len(batch)
            if input.frontier.is_empty() and held["cap"] is not None:
                output.session(held["cap"]).give(held["n"])   # sent at the initial capability
                held["cap"].drop()
                held["cap"] = None

        return logic

    assert collect(lambda s: s.to_stream(range(5)).unary_frontier(None, "Counter", counter)) == [(0, 5)]

    def join(cap, info):
        cap.drop()
        left, right = {}, {}

        def logic(in1, in2, out):
            for t, batch in in1:
                for k, v in batch:
                    left[k] = v
                    if k in right:
                        out.session(t).give((k, v, right[k]))
            for t, batch in in2:
                for k, v in batch:
                    right[k] = v
                    if k in left:
                        out.session(t).give((k, left[k], v))

        return logic

    def build(s):
        first = s.index == 0   # to_stream sends on every worker: feed from worker 0 only
        a = s.to_stream([(1, "a"), (2, "b")] if first else [])
        b = s.to_stream([(2, "B"), (3, "C")] if first else [])
        return a.binary(b, lambda kv: kv[0], lambda kv: kv[0], "Join", join)

    assert collect(build) == [(0, (2, "b", "B"))]
    assert collect(build, threads=3) == [(0, (2, "b", "B"))]

    sunk = []
    ts.example(lambda s: s.to_stream([1, 2]).sink(None, "Sink", lambda inp: sunk.extend(x for _, b in inp for x in b)))
    assert sunk == [1, 2]


def test_binary_frontier_and_binary_notify():
    def zip_when_complete(in1, in2, out, notificator):
        for cap, b in in1:
            notificator.notify_at(cap)
        for cap, b in in2:
            notificator.notify_at(cap)
        notificator.for_each(lambda cap: out.session(cap).give(("complete", cap.time)))

    def build(s):
        a = stream_of(s, {0: [1], 2: [1]})
        b = stream_of(s, {2: [1], 4: [1]})
        return a.binary_notify(b, None, None, "Both", [1], zip_when_complete)

    # each time once, including the time 1 requested at construction
    assert collect(build) == [(0, ("complete", 0)), (1, ("complete", 1)), (2, ("complete", 2)), (4, ("complete", 4))]

    def frontiers(cap, info):
        cap.drop()
        log = []

        def logic(in1, in2, out):
            in1.take(), in2.take()
            log.append((in1.frontier.elements(), in2.frontier.elements()))

        return logic

    log_holder = []

    def build2(s):
        a = stream_of(s, {0: [1], 3: [1]})
        b = stream_of(s, {1: [1]})
        out = a.binary_frontier(b, None, None, "Frontiers", frontiers)
        return out

    collect(build2)  # runs to completion: both frontiers must end empty
    del log_holder


def test_source_operator_with_reactivation():
    def ticker(cap, info):
        state = {"t": 0}

        def logic(output):
            if state["t"] < 3:
                output.session(cap).give(state["t"])
                cap.downgrade(cap.time + 1)
                state["t"] += 1
                info.activate()
            else:
                cap.drop()

        return logic

    assert collect(lambda s: ts.source(s, "Ticker", ticker)) == [(0, 0), (1, 1), (2, 2)]


def test_region_is_transparent():
    def build(s):
        return s.region(lambda r: stream_of(s, {0: [1], 2: [2]}).enter(r).map(lambda x: x * 100).leave())

    assert collect(build) == [(0, 100), (2, 200)]


def test_tuple_and_unit_timestamps():
    def build(s):
        inp, stream = s.new_input()
        inp.advance_to((1, 0))
        inp.send("a")
        inp.advance_to((1, 5))
        inp.send("b")
        inp.close()
        return stream.count()

    assert collect(build, time=(0, 0)) == [((1, 0), 1), ((1, 5), 1)]
    assert collect(lambda s: s.to_stream("xy").count(), time=()) == [((), 2)]
