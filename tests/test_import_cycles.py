"""The modules of ``python/ringbound`` import one another one way: no import cycle.

The graph is read from the source with ``ast``, so an import hidden inside a function counts as
much as one at the top of a module: a cycle held apart at run time only by the order in which
functions happen to run is still a cycle. Imports under ``if TYPE_CHECKING:`` count too: they
run nothing, but a low module that names an upper one's type depends on it (it takes the upper
object and reads its parts), and that dependency is the knot this test keeps out. Each edge of a
reported cycle says which kind it is (``module``, ``function`` or ``type``) and where it is.

Importing ``a.b.c`` runs the package ``a.b`` first, so a module depends on the packages above
each module it imports; the root package is the exception, since every import of the package
runs it first by construction (it re-exports the public names of nearly every module).
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "python" / "ringbound"

#: How an import runs: at the module's import, when a function runs, or never (type checkers).
KINDS = ("module", "function", "type")


@dataclass(frozen=True)
class Edge:
    """One import of ``target`` by ``source``."""

    source: str
    target: str
    kind: str
    where: str

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({self.kind}, {self.where})"


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Every module of the package at ``root`` by dotted name, with its file and whether it
    is a package (``__init__.py``); compiled extensions (``_core``) by name, file None."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in root.rglob("*"):
        rel = path.relative_to(root.parent)
        if path.suffix == ".py":
            parts = list(rel.with_suffix("").parts)
            package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if package else parts)] = (path, package)
        elif path.suffix in (".so", ".pyd"):
            name = ".".join((*rel.parts[:-1], path.name.split(".")[0]))
            found.setdefault(name, (path, False))
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(node: ast.Import | ast.ImportFrom, name: str, package: bool) -> list[str]:
    """The dotted names ``node`` imports, relative imports resolved against module ``name``:
    ``from p import x`` imports ``p.x`` when that is a module, else ``p`` (to be narrowed to
    a known module by the caller)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = name.split(".") if package else name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        module = ".".join([*base, *([node.module] if node.module else [])])
    else:
        module = node.module or ""
    return [f"{module}.{alias.name}" for alias in node.names] + [module]


def _imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement of a module with its kind (``KINDS``)."""
    work: list[tuple[ast.AST, str]] = [(tree, "module")]
    while work:
        node, kind = work.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, kind
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            work += [(stmt, "type") for stmt in node.body]
            work += [(stmt, kind) for stmt in node.orelse]
        else:
            if kind == "module" and isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
            ):
                kind = "function"
            work += [(child, kind) for child in ast.iter_child_nodes(node)]


def edges(root: Path) -> list[Edge]:
    """Every import between modules of the package at ``root``."""
    known = modules(root)
    top = root.name
    out: list[Edge] = []
    for name, (path, package) in known.items():
        if path.suffix != ".py":
            continue
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, kind in _imports(tree):
            candidates = _imported(node, name, package)
            if isinstance(node, ast.ImportFrom):
                # ``from p import x``: the submodule x when there is one, else p itself.
                subs = [c for c in candidates[:-1] if c in known]
                candidates = subs if len(subs) == len(candidates) - 1 else [*subs, candidates[-1]]
            where = f"{rel}:{node.lineno}"
            for target in candidates:
                while target not in known and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target not in known or target == name:
                    continue  # outside the package, or itself
                out.append(Edge(name, target, kind, where))
                # Importing a.b.c runs the packages a.b and a first: the root excepted, and
                # the packages above the importer, which are running already.
                parent = target.rsplit(".", 1)[0]
                while parent != top and "." in parent:
                    if not name.startswith(f"{parent}."):
                        out.append(Edge(name, parent, kind, f"{where} (runs {parent})"))
                    parent = parent.rsplit(".", 1)[0]
    return out


def cycles(graph: list[Edge]) -> list[tuple[list[str], list[Edge]]]:
    """Each strongly connected set of modules (Tarjan), with one shortest cycle through it as
    its edges; empty when the graph is acyclic."""
    succ: dict[str, dict[str, Edge]] = {}
    for e in graph:
        # Of several imports of one module, the one that runs earliest stands for them.
        have = succ.setdefault(e.source, {}).get(e.target)
        if have is None or KINDS.index(e.kind) < KINDS.index(have.kind):
            succ[e.source][e.target] = e
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    sets: list[set[str]] = []

    def connect(v: str) -> None:
        # Iterative Tarjan: the graph is small, but recursion depth is not ours to assume.
        work = [(v, iter(sorted(succ.get(v, {}))))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        while work:
            node, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(succ.get(w, {})))))
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        members.add(w)
                        if w == node:
                            break
                    if len(members) > 1:
                        sets.append(members)

    for v in sorted(succ):
        if v not in index:
            connect(v)
    return [(sorted(s), _shortest_cycle(min(s), s, succ)) for s in sorted(sets, key=min)]


def _shortest_cycle(start: str, members: set[str], succ: dict[str, dict[str, Edge]]) -> list[Edge]:
    came: dict[str, Edge] = {}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w, e in sorted(succ.get(v, {}).items()):
            if w not in members:
                continue
            if w == start:
                path = [e]
                while path[0].source != start:
                    path.insert(0, came[path[0].source])
                return path
            if w not in came:
                came[w] = e
                queue.append(w)
    raise AssertionError(f"{start} lies on no cycle of {sorted(members)}")


def describe(found: list[tuple[list[str], list[Edge]]]) -> str:
    lines = []
    for members, cycle in found:
        lines.append(f"{len(members)} modules in a cycle: {', '.join(members)}; one of its loops:")
        lines += [f"    {e}" for e in cycle]
    return "\n".join(lines)


def test_ringbound_imports_without_a_cycle() -> None:
    found = cycles(edges(PACKAGE))
    assert not found, "import cycles in python/ringbound:\n" + describe(found)


def test_the_graph_sees_the_package() -> None:
    # A reader that found nothing would pass the test above for the wrong reason.
    graph = edges(PACKAGE)
    pairs = {(e.source, e.target) for e in graph}
    assert ("ringbound.assembler", "ringbound.config") in pairs
    assert ("ringbound.stores", "ringbound.stores.memory") in pairs
    assert "ringbound._core" in {e.target for e in graph}


def _write(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "pkg"
    for name, text in files.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return pkg


@pytest.mark.parametrize(
    ("files", "kinds"),
    [
        pytest.param(
            {"__init__.py": "", "a.py": "from . import b\n", "b.py": "from .a import x\n"},
            {"module"},
            id="module-level",
        ),
        pytest.param(
            {
                "__init__.py": "",
                "a.py": "from .b import y\n",
                "b.py": "def f():\n    from .a import x\n    return x\n",
            },
            {"module", "function"},
            id="inside-a-function",
        ),
        pytest.param(
            {
                "__init__.py": "",
                "a.py": "from .b import y\n",
                "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from .a import A\n",
            },
            {"module", "type"},
            id="type-only",
        ),
        pytest.param(
            {
                "__init__.py": "",
                "a.py": "from .sub.c import z\n",
                "sub/__init__.py": "from .d import w\n",
                "sub/c.py": "",
                "sub/d.py": "def g():\n    import pkg.a\n",
            },
            {"module", "function"},
            id="through-a-package-init",
        ),
    ],
)
def test_a_cycle_is_found(tmp_path: Path, files: dict[str, str], kinds: set[str]) -> None:
    found = cycles(edges(_write(tmp_path, files)))
    assert len(found) == 1
    assert {e.kind for e in found[0][1]} == kinds
    assert "pkg.a" in describe(found)


def test_one_way_imports_are_no_cycle(tmp_path: Path) -> None:
    files = {
        "__init__.py": "from .a import x\nfrom .b import y\n",
        "a.py": "from .b import y\nfrom . import _core\nimport os\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import C\n",
        "c.py": "def f():\n    import json\n",
        "_core.abi3.so": "",
    }
    assert cycles(edges(_write(tmp_path, files))) == []
