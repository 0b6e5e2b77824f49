import pytest

from timely_spark.progress import (
    Add,
    Antichain,
    Builder,
    CycleError,
    Product,
    ProductSummary,
    Source,
    Target,
    advance,
    identity,
)


def loop_graph(feedback_summary):
    """input(0) -> concat(1) -> body(2) -> feedback(3) -> concat(1); body -> sink(4)."""
    t0 = Product(0, 0)
    ident = identity(t0)
    b = Builder(t0)
    b.add_node(0, 0, 1, [], name="input")
    b.add_node(1, 2, 1, [[Antichain([ident])], [Antichain([ident])]], name="concat")
    b.add_node(2, 1, 1, [[Antichain([ident])]], name="body")
    b.add_node(3, 1, 1, [[Antichain([feedback_summary])]], name="feedback")
    b.add_node(4, 1, 0, [[]], name="sink")
    b.add_edge(Source(0, 0), Target(1, 0))
    b.add_edge(Source(1, 0), Target(2, 0))
    b.add_edge(Source(2, 0), Target(3, 0))
    b.add_edge(Source(3, 0), Target(1, 1))
    b.add_edge(Source(2, 0), Target(4, 0))
    return b


def test_builder_rejects_identity_cycle_and_names_it():
    b = loop_graph(identity(Product(0, 0)))
    with pytest.raises(CycleError) as err:
        b.build()
    message = str(err.value)
    for name in ("concat[1]", "body[2]", "feedback[3]"):
        assert name in message
    assert "input[0]" not in message and "sink[4]" not in message


def test_builder_rejects_self_loop():
    b = Builder(0)
    b.add_node(1, 1, 1, [[Antichain([Add(0)])]], name="op")
    b.add_edge(Source(1, 0), Target(1, 0))
    with pytest.raises(CycleError, match="op"):
        b.build()


def test_builder_rejects_undeclared_ports():
    b = Builder(0)
    b.add_node(1, 1, 1, [[Antichain([Add(0)])]])
    b.add_edge(Source(1, 0), Target(2, 0))
    with pytest.raises(ValueError, match="not a declared port"):
        b.build()


def test_compiled_summaries_of_a_loop():
    b = loop_graph(advance(Product(0, 0)))
    summ = b.summaries()
    # from the feedback output back to the body input: identity; body to itself round the loop: +1
    assert summ[Source(3, 0)][Target(2, 0)] == Antichain([identity(Product(0, 0))])
    assert summ[Target(2, 0)][Target(2, 0)] == Antichain([identity(Product(0, 0))])
    assert summ[Source(2, 0)][Target(2, 0)] == Antichain([ProductSummary(Add(0), Add(1))])
    assert Target(0, 0) not in summ[Source(2, 0)]  # nothing flows back to the input


def test_tracker_frontiers_in_a_loop():
    tracker = loop_graph(advance(Product(0, 0))).build()
    tracker.update_source(Source(0, 0), Product(0, 0), 1)      # input capability
    tracker.update_target(Target(2, 0), Product(0, 3), 1)      # a message at the body
    tracker.propagate_all()
    assert tracker.frontier(Target(2, 0)) == Antichain([Product(0, 0)])
    tracker.update_source(Source(0, 0), Product(0, 0), -1)     # input closes
    tracker.propagate_all()
    assert tracker.frontier(Target(2, 0)) == Antichain([Product(0, 3)])
    assert tracker.frontier(Target(3, 0)) == Antichain([Product(0, 3)])
    assert tracker.frontier(Target(1, 1)) == Antichain([Product(0, 4)])   # through the feedback
    tracker.update_target(Target(2, 0), Product(0, 3), -1)
    tracker.propagate_all()
    assert all(tracker.frontier(Target(n, p)).is_empty() for n, p in [(1, 0), (1, 1), (2, 0), (3, 0), (4, 0)])
    assert not tracker.tracking_anything()


def test_bounded_loop_summary_stops_implications():
    tracker = loop_graph(ProductSummary(Add(0), Add(1, limit=5))).build()
    tracker.update_target(Target(3, 0), Product(0, 5), 1)
    tracker.propagate_all()
    assert tracker.frontier(Target(1, 1)).is_empty()         # no round after the 5th
    assert tracker.frontier(Target(3, 0)) == Antichain([Product(0, 5)])


def test_observed_targets_limit_upkeep():
    tracker = loop_graph(advance(Product(0, 0))).build(observed=[Target(4, 0)])
    tracker.update_source(Source(0, 0), Product(0, 0), 1)
    tracker.propagate_all()
    assert tracker.drain_pushed() == [(Target(4, 0), Product(0, 0), 1)]
    with pytest.raises(KeyError):
        tracker.frontier(Target(2, 0))
