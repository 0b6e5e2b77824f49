"""Property-based tests of the progress-tracking safety property (progress seed).

Hypothesis builds a small dataflow graph whose cycles all pass through feedback
operators with strictly advancing summaries, then simulates several workers
performing legal actions -- consume a message, send at a held capability,
clone / downgrade / drop a capability -- each action recorded as one atomic
progress batch in that worker's FIFO sequence.  An observer receives arbitrary
prefixes of those sequences, interleaved arbitrarily, into a Tracker.

Safety: whenever the observer says no message at ``(target, t)`` is possible, no
such message exists then or is ever created later.  Liveness at the end: once
all capabilities are dropped, all messages consumed and all batches delivered,
every frontier is empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from timely_spark.progress import Add, Antichain, Builder, Product, Source, Target, advance, identity


@dataclass
class Kind:
    zero: object
    feedback: object

    def later(self, t, steps):
        """A time at or after ``t``, moved by the drawn steps."""
        if isinstance(t, Product):
            return Product(t.outer + steps[0], t.inner + steps[1])
        return t + steps[0]


KINDS = {
    "int": Kind(0, Add(1)),
    "product": Kind(Product(0, 0), advance(Product(0, 0))),
}


@dataclass
class Graph:
    kind: Kind
    feedback: list[bool]                      # node -> is a feedback operator
    edges: list[tuple[int, int]]              # (source node, target node), one port each
    names: list[str] = field(default_factory=list)

    def targets_of(self, node):
        return [Target(j, 0) for i, j in self.edges if i == node]

    def builder(self):
        ident = identity(self.kind.zero)
        b = Builder(self.kind.zero)
        b.add_node(0, 0, 1, [], name="input")
        for n in range(1, len(self.feedback)):
            s = self.kind.feedback if self.feedback[n] else ident
            b.add_node(n, 1, 1, [[Antichain([s])]], name=f"op{n}")
        for i, j in self.edges:
            b.add_edge(Source(i, 0), Target(j, 0))
        return b


@st.composite
def graphs(draw):
    kind = KINDS[draw(st.sampled_from(sorted(KINDS)))]
    n = draw(st.integers(2, 5))
    feedback = [False] + [draw(st.booleans()) for _ in range(1, n)]
    edges = set()
    for j in range(1, n):
        edges.add((draw(st.integers(0, j - 1)), j))          # every operator is fed
    for _ in range(draw(st.integers(0, 4))):
        i, j = draw(st.integers(0, n - 1)), draw(st.integers(1, n - 1))
        if i < j or feedback[j]:                                # backward edges only into feedback
            edges.add((i, j))
    return Graph(kind, feedback, sorted(edges))


class Simulation:
    def __init__(self, graph: Graph, workers: int):
        self.g = graph
        self.workers = workers
        nodes = len(graph.feedback)
        z = graph.kind.zero
        # capabilities[w][node] -> list of times held at the node's output
        self.caps = [[[z] for _ in range(nodes)] for _ in range(workers)]
        self.messages: list[tuple[Target, object]] = []          # in flight
        self.batches: list[list[list]] = [[] for _ in range(workers)]
        self.delivered = [0] * workers
        self.tracker = graph.builder().build()
        for node in range(nodes):
            self.tracker.update_source(Source(node, 0), z, workers)
        self.tracker.propagate_all()
        self.observations: dict[Target, list[Antichain]] = {}
        self.observe()

    # -- the safety check ----------------------------------------------------------
    def observe(self):
        for node in range(1, len(self.g.feedback)):
            target = Target(node, 0)
            frontier = self.tracker.frontier(target)
            self.observations.setdefault(target, []).append(frontier)
            for t2, t in self.messages:
                if t2 == target:
                    assert frontier.less_equal(t), f"message at {target} {t} in flight, frontier {frontier}"

    def create_message(self, target, t):
        for frontier in self.observations.get(target, ()):
            assert frontier.less_equal(t), f"{target} {t} created after the observer ruled it out ({frontier})"
        self.messages.append((target, t))

    # -- actions -------------------------------------------------------------------
    def send(self, w, node, t, count, batch):
        for target in self.g.targets_of(node):
            for _ in range(count):
                self.create_message(target, t)
                batch.append((target, t, 1))

    def act(self, data):
        w = data.draw(st.integers(0, self.workers - 1))
        choice = data.draw(st.sampled_from(["consume", "consume", "send", "clone", "downgrade", "drop", "drop",
                                            "deliver", "deliver"]))
        steps = lambda: data.draw(st.tuples(st.integers(0, 1), st.integers(0, 1)))  # noqa: E731
        batch = []
        if choice == "deliver":
            self.deliver(w)
            return
        if choice == "consume" and self.messages:
            target, t = self.messages.pop(data.draw(st.integers(0, len(self.messages) - 1)))
            batch.append((target, t, -1))
            node = target.node
            summary = self.g.kind.feedback if self.g.feedback[node] else identity(self.g.kind.zero)
            out = summary.results_in(t)
            if out is not None:
                if data.draw(st.booleans()):
                    self.send(w, node, self.g.kind.later(out, steps()), data.draw(st.integers(1, 2)), batch)
                if data.draw(st.booleans()):
                    kept = self.g.kind.later(out, steps())
                    self.caps[w][node].append(kept)
                    batch.append((Source(node, 0), kept, 1))
        else:
            held = [(node, i) for node, ts in enumerate(self.caps[w]) for i in range(len(ts))]
            if not held:
                return
            node, i = held[data.draw(st.integers(0, len(held) - 1))]
            t = self.caps[w][node][i]
            later = self.g.kind.later(t, steps())
            if choice == "send":
                self.send(w, node, later, data.draw(st.integers(1, 2)), batch)
            elif choice == "clone":
                self.caps[w][node].append(later)
                batch.append((Source(node, 0), later, 1))
            elif choice == "downgrade":
                self.caps[w][node][i] = later
                batch += [(Source(node, 0), t, -1), (Source(node, 0), later, 1)]
            elif choice == "drop":
                self.caps[w][node].pop(i)
                batch.append((Source(node, 0), t, -1))
        if batch:
            self.batches[w].append(batch)

    def deliver(self, w):
        if self.delivered[w] < len(self.batches[w]):
            for loc, t, d in self.batches[w][self.delivered[w]]:
                self.tracker.update(loc, t, d)
            self.delivered[w] += 1
            self.tracker.propagate_all()
            self.observe()

    def finish(self):
        """Drop every capability, consume every message, deliver everything."""
        for _ in range(1000):
            for w in range(self.workers):
                batch = []
                for node, ts in enumerate(self.caps[w]):
                    batch += [(Source(node, 0), t, -1) for t in ts]
                    ts.clear()
                if self.messages:
                    target, t = self.messages.pop()
                    batch.append((target, t, -1))
                if batch:
                    self.batches[w].append(batch)
            for w in range(self.workers):
                while self.delivered[w] < len(self.batches[w]):
                    self.deliver(w)
            if not self.messages and not any(len(ts) for caps in self.caps for ts in caps):
                break
        for node in range(1, len(self.g.feedback)):
            assert self.tracker.frontier(Target(node, 0)).is_empty()
        assert not self.tracker.tracking_anything()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs(), workers=st.integers(1, 3), data=st.data())
@pytest.mark.slow
def test_safety_property(graph, workers, data):
    sim = Simulation(graph, workers)
    # Most operators (map, filter, ...) drop their initial capability at once.
    for w in range(workers):
        for node in range(1, len(graph.feedback)):
            if data.draw(st.booleans()):
                sim.caps[w][node].clear()
                sim.batches[w].append([(Source(node, 0), graph.kind.zero, -1)])
    for _ in range(data.draw(st.integers(0, 60))):
        sim.act(data)
    sim.finish()


def test_simulation_catches_a_broken_tracker():
    """The check above must be able to fail: drop the feedback summary's effect and
    the observer rules out times that still arrive."""
    g = Graph(KINDS["int"], [False, False], [(0, 1)])
    sim = Simulation(g, 1)
    sim.tracker.update_source(Source(0, 0), 0, -1)     # claim the capability is gone (a lie)
    sim.tracker.propagate_all()
    sim.observe()
    try:
        sim.create_message(Target(1, 0), 0)            # ...but the input still sends at 0
    except AssertionError:
        return
    raise AssertionError("the safety check did not notice an impossible message")
