"""The package's structure: layers import only downward, and no module imports itself back.

Every import statement counts, at module level or inside a function; only imports
under ``if TYPE_CHECKING:`` (for annotations) do not.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "timely_spark"

# A module may import modules of its own rank or lower.  Leaves import nothing of the
# package but other leaves; anyone may import them.
RANKS = {
    "_version": 0, "errors": 0, "function_pickle": 0, "runtime": 0,
    "progress": 1,
    "communication": 2, "logging": 2,
    "dataflow": 3,
    "capture": 4, "sync": 4,
    "state": 5,        # snapshots and restore: below every way of running, above what it saves
    "execute": 6, "launch": 6, "child": 6, "process": 6, "plot": 6,
    "testing": 7,
    "spark": 8,
    "graph": 9,        # its functions take Spark DataFrames too, so it sits above spark
    "workloads": 10,   # standard benchmark workloads (Nexmark) on the public API and Spark
    "__init__": 11,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(name: str) -> set[str]:
    """The package modules that module ``name`` imports."""
    path = MODULES[name]
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target in MODULES or target.startswith("timely_spark"):
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    found.add(sub if sub in MODULES else target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(name)
    return {m for m in found if m in MODULES}


GRAPH = {name: imports_of(name) for name in MODULES}


def layer(name: str) -> int:
    parts = name.split(".")
    return RANKS["__init__"] if len(parts) == 1 else RANKS[parts[1]]


def test_every_module_has_a_layer():
    assert all(name == "timely_spark" or name.split(".")[1] in RANKS for name in MODULES), sorted(MODULES)


def test_lower_layers_never_import_higher_ones():
    upward = [(m, t) for m, targets in GRAPH.items() for t in targets if layer(t) > layer(m)]
    assert upward == [], "imports that go up a layer: " + ", ".join(f"{m} -> {t}" for m, t in upward)


def test_no_import_cycles():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    counter = [0]

    def connect(v: str) -> None:                      # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            connect(v)
    assert cycles == [], f"import cycles: {cycles}"


def test_launch_does_not_import_execute():
    assert "timely_spark.execute" not in GRAPH["timely_spark.launch"]


def test_the_checker_sees_imports_inside_functions():
    # the engine's worker builds its logging registry lazily; that import must count
    assert "timely_spark.logging" in GRAPH["timely_spark.dataflow.worker"]
