"""Fixtures for the engine tests (the generic helpers are public: timely_spark.testing)."""

from __future__ import annotations


def collatz_steps(n):
    """The reference: how many Collatz steps take ``n`` to 1."""
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def collatz_dataflow(scope, numbers):
    """Step counts computed by a loop: each number circulates (exchanged by its current
    value) until it reaches 1; the round it leaves at is its step count.  Returns a
    stream of ``(n, steps)`` in ``scope`` (numbers are fed from worker 0)."""
    start = scope.to_stream(numbers if scope.index == 0 else [])

    def rounds(cap, info):
        cap.drop()

        def logic(input, output):
            for t, batch in input:
                output.session(t).give_batch([(s[0], t.time.inner) for s in batch])

        return logic

    def loop(inner):
        handle, cycle = inner.feedback(1)
        state = start.map(lambda n: (n, n)).enter(inner).concat(cycle)
        done, going = state.branch(lambda s: s[1] != 1)
        going.exchange(lambda s: s[1]).map(
            lambda s: (s[0], s[1] // 2 if s[1] % 2 == 0 else 3 * s[1] + 1)).connect_loop(handle)
        return done.unary(None, "Rounds", rounds).leave()

    return scope.iterative(loop)
