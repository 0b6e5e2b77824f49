"""Notifications: only for complete times, each once, in an order consistent with
the partial order -- including under a frontier with incomparable elements."""

import time

import pytest

import timely_spark as ts
from timely_spark import Product
from timely_spark.progress import less_equal, less_than


def test_notifications_under_a_partially_ordered_frontier():
    P = Product

    def work(worker):
        delivered, requested = [], []

        def build(s):
            a_in, a = s.new_input("A")
            b_in, b = s.new_input("B")

            def logic(inp, out, notificator):
                for cap, data in inp:
                    requested.append(cap.time)
                    notificator.notify_at(cap)
                    notificator.notify_at(cap)       # twice: delivered once
                for cap in notificator:
                    delivered.append((cap.time, inp.frontier.elements()))
                    out.session(cap).give(cap.time)

            probe = a.concat(b).unary_notify(None, "Notify", [], logic).probe()
            return a_in, b_in, probe

        a_in, b_in, probe = worker.dataflow(build, time=P(0, 0))
        plan = [(a_in, P(0, 1)), (b_in, P(1, 0)), (a_in, P(0, 3)), (b_in, P(2, 0)), (a_in, P(1, 3)),
                (b_in, P(2, 2)), (a_in, P(3, 3)), (b_in, P(4, 2))]
        for handle, t in plan:
            handle.advance_to(t)
            handle.send("x")
            for _ in range(5):
                worker.step()
        a_in.close()
        b_in.close()
        worker.step_while(lambda: not probe.done(), timeout=10)
        return delivered, requested

    delivered, requested = ts.execute(work, timeout=30)[0]
    times = [t for t, _ in delivered]
    assert sorted(set(requested), key=repr) == sorted(times, key=repr)    # each requested time, once
    assert len(times) == len(set(times))
    for t, frontier in delivered:                                    # only complete times
        assert not any(less_equal(f, t) for f in frontier), (t, frontier)
    for i, t in enumerate(times):                                    # consistent with the order
        assert not any(less_than(later, t) for later in times[i + 1:])
    # while A sat at (0, 3) and B at (2, 0), (1, 0) was deliverable but (2, 2) was not
    assert times.index(Product(1, 0)) < times.index(Product(2, 2))


@pytest.mark.parametrize("threads", [1, 2])
def test_notify_waits_for_every_worker(threads):
    def work(worker):
        fired = []

        def build(s):
            inp, stream = s.new_input()

            def logic(input, output, notificator):
                for cap, data in input:
                    notificator.notify_at(cap)
                notificator.for_each(lambda cap: fired.append((cap.time, time.monotonic())))

            probe = stream.exchange(lambda x: 0).unary_notify(None, "N", [], logic).probe()
            return inp, probe

        inp, probe = worker.dataflow(build)
        inp.send(worker.index)
        if worker.index == threads - 1:
            time.sleep(0.3)                     # the last worker is slow to finish epoch 0
        advanced = time.monotonic()
        inp.advance_to(1)
        worker.step_while(lambda: probe.less_than(1), timeout=10)
        inp.close()
        return fired, advanced

    results = ts.execute(work, threads=threads, timeout=30)
    fired = results[0][0]
    assert [t for t, _ in fired] == [0]
    slowest_advance = max(r[1] for r in results)       # one clock for every worker thread
    assert fired[0][1] >= slowest_advance              # not before every worker advanced


def test_notificator_init_times():
    def logic(input, output, notificator):
        input.take()
        notificator.for_each(lambda cap: output.session(cap).give("tick"))

    def work(worker):
        seen = []
        worker.dataflow(lambda s: s.to_stream([]).unary_notify(None, "Init", [2, 5], logic)
                        .inspect_time(lambda t, x: seen.append((t, x))))
        return seen

    assert ts.execute(work, timeout=30) == [[(2, "tick"), (5, "tick")]]


def test_an_operator_awaiting_no_time_is_not_run_on_frontier_changes():
    """``build(logic, notify=waiting)``: a frontier change runs the operator only while
    ``waiting()`` is true; its frontier is up to date all the same when input runs it."""
    def work(worker):
        runs, seen, held, ports = [], [], [], []

        def build(s):
            inp, stream = s.new_input()
            b = ts.OperatorBuilder(s, "Waits")
            port = b.new_input(stream)
            ports.append(port)
            out, result = b.new_output()

            def logic():
                runs.append(inp.time)
                for cap, data in port:
                    seen.append((cap.time, port.frontier.elements()))
                    held.append(cap.retain())
                while held and not port.frontier.less_equal(held[0].time):
                    held.pop(0).drop()

            b.build(logic, notify=lambda: bool(held), initial_capabilities=False)
            return inp, result.probe()

        inp, probe = worker.dataflow(build)
        for t in range(1, 6):                          # no input: frontier changes only
            inp.advance_to(t)
            worker.step_while(lambda: probe.less_than(inp.time))
        idle, between = len(runs), ports[0].frontier.elements()
        inp.send("x")
        inp.advance_to(6)
        worker.step_while(lambda: probe.less_than(inp.time))
        return idle, between, seen, len(held)

    idle, between, seen, held = ts.execute(work)[0]
    assert idle <= 1                                   # (its first run, at build) -- not one per time
    assert between == [5]                              # its frontier followed (the changes do not pile up)
    assert seen == [(5, [5])]                          # the frontier it sees is the current one
    assert held == 0                                   # and while it held a time, the change ran it
