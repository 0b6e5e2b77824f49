"""A built dataflow as a graph: operators, ports, edges and nested scopes -- to look at.

``worker.dataflow_graphs()`` describes every dataflow built on a worker.  A
:class:`ScopeGraph` lists its operators and edges (``operators()``, ``edges()``, both
flattened over nested scopes), and renders as Mermaid (shown by Jupyter as a
diagram), Graphviz DOT text, or SVG where the ``graphviz`` package and ``dot`` exist.

Inside a scope, ``in<i>`` and ``out<o>`` stand for the scope's input and output ports.

>>> import timely_spark as ts
>>> def build(scope):
...     scope.to_stream([1]).map(lambda x: x).inspect(print)
>>> (g,) = ts.execute(lambda w: (w.dataflow(build), w.dataflow_graphs())[1])[0]
1
>>> g.operators()
[('0.1', 'ToStream'), ('0.2', 'Map'), ('0.3', 'Inspect')]
>>> g.edges()
[('0.1:0', '0.2:0'), ('0.2:0', '0.3:0')]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = ["ScopeGraph", "Node", "describe"]


@dataclass
class Node:
    """An operator or nested scope in a :class:`ScopeGraph`: its index, address, name and port counts."""
    index: int
    address: str
    name: str
    inputs: int
    outputs: int
    scope: Optional["ScopeGraph"] = None     # set for nested scopes


@dataclass
class ScopeGraph:
    """A scope as a graph: its nodes (``scope`` set for nested scopes) and links between ports."""
    name: str
    address: str
    inputs: int
    outputs: int
    nodes: list[Node] = field(default_factory=list)
    links: list[tuple[tuple[int, int], tuple[int, int]]] = field(default_factory=list)

    # ---- flat views ----------------------------------------------------------------------
    def _port(self, node: int, port: int, out: bool) -> str:
        if node == 0:
            return f"{self.address}:{'in' if out else 'out'}{port}"
        return f"{self.address}.{node}:{port}"

    def operators(self) -> list[tuple[str, str]]:
        """``(address, name)`` of every operator and nested scope, depth first."""
        out = []
        for n in self.nodes:
            out.append((n.address, n.name))
            if n.scope is not None:
                out.extend(n.scope.operators())
        return out

    def edges(self) -> list[tuple[str, str]]:
        """``(source "address:port", target "address:port")`` of every edge; a scope's
        own ports are ``"<scope>:in<i>"`` and ``"<scope>:out<o>"``."""
        out = [(self._port(s[0], s[1], True), self._port(t[0], t[1], False)) for s, t in self.links]
        for n in self.nodes:
            if n.scope is not None:
                out.extend(n.scope.edges())
        return out

    # ---- pictures ------------------------------------------------------------------------
    @staticmethod
    def _id(address: str) -> str:
        return "n" + address.replace(".", "_").replace(":", "__")

    def _endpoint(self, node: int, port: int, out: bool) -> str:
        if node == 0:
            return self._id(f"{self.address}:{'in' if out else 'out'}{port}")
        child = next(n for n in self.nodes if n.index == node)
        if child.scope is not None:   # into a nested scope's port
            return self._id(f"{child.address}:{'out' if out else 'in'}{port}")
        return self._id(child.address)

    def mermaid_lines(self, indent: str) -> list[str]:
        """This scope's lines of a Mermaid flowchart, nested scopes as subgraphs."""
        lines = []
        for i in range(self.inputs):
            lines.append(f'{indent}{self._id(f"{self.address}:in{i}")}(["in {i}"])')
        for o in range(self.outputs):
            lines.append(f'{indent}{self._id(f"{self.address}:out{o}")}(["out {o}"])')
        for n in self.nodes:
            if n.scope is None:
                lines.append(f'{indent}{self._id(n.address)}["{n.name} ({n.address})"]')
            else:
                lines.append(f'{indent}subgraph {self._id(n.address)}_scope["{n.name} ({n.address})"]')
                lines.extend(n.scope.mermaid_lines(indent + "  "))
                lines.append(f"{indent}end")
        for s, t in self.links:
            lines.append(f"{indent}{self._endpoint(*s, True)} --> {self._endpoint(*t, False)}")
        return lines

    def to_mermaid(self) -> str:
        """Mermaid flowchart text."""
        return "\n".join(["flowchart LR"] + self.mermaid_lines("  "))

    def dot_lines(self, indent: str) -> list[str]:
        """This scope's lines of a Graphviz DOT graph, nested scopes as clusters."""
        lines = []
        for i in range(self.inputs):
            lines.append(f'{indent}{self._id(f"{self.address}:in{i}")} [label="in {i}", shape=circle];')
        for o in range(self.outputs):
            lines.append(f'{indent}{self._id(f"{self.address}:out{o}")} [label="out {o}", shape=circle];')
        for n in self.nodes:
            if n.scope is None:
                lines.append(f'{indent}{self._id(n.address)} [label="{n.name}\\n{n.address}", shape=box];')
            else:
                lines.append(f'{indent}subgraph cluster_{self._id(n.address)} {{')
                lines.append(f'{indent}  label="{n.name} ({n.address})";')
                lines.extend(n.scope.dot_lines(indent + "  "))
                lines.append(f"{indent}}}")
        for s, t in self.links:
            lines.append(f"{indent}{self._endpoint(*s, True)} -> {self._endpoint(*t, False)};")
        return lines

    def to_dot(self) -> str:
        """Graphviz DOT text."""
        return "\n".join([f'digraph "{self.name}" {{', "  rankdir=LR;"] + self.dot_lines("  ") + ["}"])

    def to_svg(self) -> str:
        """SVG, drawn by Graphviz (needs the ``graphviz`` package and the ``dot`` program)."""
        import graphviz  # noqa: PLC0415 -- optional

        return graphviz.Source(self.to_dot()).pipe(format="svg").decode()

    def _repr_markdown_(self) -> str:
        return f"```mermaid\n{self.to_mermaid()}\n```"

    def _repr_svg_(self) -> Optional[str]:
        try:
            return self.to_svg()
        except Exception:   # no graphviz here: Jupyter shows the Mermaid markdown instead
            return None


def describe(graph: Any) -> ScopeGraph:
    """Describe a subgraph (a dataflow's top scope, or a nested one)."""
    address = ".".join(str(p) for p in graph.path)
    scope = ScopeGraph(graph.name, address, graph.inputs, graph.outputs)
    for i, child in enumerate(graph.children[1:], start=1):
        node = Node(i, f"{address}.{i}", child.name, child.inputs, child.outputs)
        if hasattr(child, "children"):
            node.scope = describe(child)
        scope.nodes.append(node)
    scope.links = [((s.node, s.port), (t.node, t.port)) for s, t in graph.edges]
    return scope
