"""Imports flow down the layers of docs/architecture.md; peers on one layer do not import each other."""

from __future__ import annotations

import ast
import pathlib

from chaos.cycles import strongly_connected

SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "odradek"

LAYER = {
    "errors": -2,
    "configdef": -1,
    "free_ports": -1,
    "protocol": 0,
    "storage": 1,
    "security": 1,
    "metadata": 2,
    "client": 2,
    "replication": 3,
    "zkclients": 3,
    "controller": 4,
    "coordinator": 4,
    "server": 5,
    "cli": 6,
    "spark": 6,
    "testing": 6,
    "testing_zk": 2,
    "metrics": 4.5,
    "schema_registry": 4.5,
}


def _package(path: pathlib.Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def test_imports_flow_down() -> None:
    problems = []
    for path in SRC.rglob("*.py"):
        pkg = _package(path)
        if pkg not in LAYER:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("odradek."):
                target = node.module.split(".")[1]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("odradek.")]
                if not names:
                    continue
                target = names[0].split(".")[1]
            else:
                continue
            if target == pkg or target not in LAYER:
                continue
            if LAYER[target] >= LAYER[pkg] and not (pkg in ("cli", "spark", "testing") and LAYER[target] == 6):
                problems.append(f"{path.relative_to(SRC)} imports odradek.{target}")
    assert not problems, "\n".join(problems)


def test_only_metadata_zookeeper_imports_kazoo() -> None:
    offenders = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if "import kazoo" in p.read_text() or "from kazoo" in p.read_text()
    ]
    assert all(o.startswith("metadata/") or o == "testing_zk.py" for o in offenders), offenders


def test_only_the_pytest_plugin_imports_pytest() -> None:
    """``odradek cluster`` (and its ZooKeeper helper) must run after a plain install, without pytest."""
    offenders = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n == "pytest" or n.startswith("pytest.") or n.startswith("_pytest") for n in names):
                offenders.append(str(path.relative_to(SRC)))
    assert sorted(set(offenders)) == ["testing.py"]


SERVER = SRC / "server"
KNOWN_SERVER_EDGES = {("odradek.server.dynamic_config", "odradek.server.broker")}
"""Import edges the cycle check tolerates: dynamic config still types its reconfiguration
functions with the broker class (a type-only import)."""


def _server_module(path: pathlib.Path) -> str:
    return ".".join(("odradek", *path.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__")


def _module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports at module level, those under ``if TYPE_CHECKING:`` (or any other module-level
    ``if``/``try``) included; imports inside function bodies are deferred and not counted."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, (ast.If, ast.Try)):
            pending.extend(node.body + node.orelse)
            if isinstance(node, ast.Try):
                pending.extend(node.finalbody + [s for h in node.handlers for s in h.body])
    return found


def server_import_graph() -> dict[str, set[str]]:
    """Module -> the ``odradek.server`` modules it imports (``from pkg import mod`` counts as mod)."""
    modules = {_server_module(p): p for p in SERVER.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in _module_level_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                candidates = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                candidates = [a.name for a in node.names]
            targets.update(c for c in candidates if c in modules and c != name)
        graph[name] = {t for t in targets if (name, t) not in KNOWN_SERVER_EDGES}
    return graph


def test_type_only_imports_count_and_deferred_ones_do_not() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from odradek.server.broker import Broker\n"
        "def later():\n"
        "    from odradek.server.apis import API_HANDLERS\n"
    )
    modules = [n.module for n in _module_level_imports(ast.parse(source)) if isinstance(n, ast.ImportFrom)]
    assert sorted(modules) == ["odradek.server.broker", "typing"]
    assert strongly_connected({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_no_import_cycles_among_server_modules() -> None:
    """Type-only imports count: a circle of them is still a circle of the design."""
    graph = server_import_graph()
    assert "odradek.server.request" in graph and "odradek.server.apis.produce" in graph
    assert strongly_connected(graph) == []


def test_handlers_do_not_import_the_broker() -> None:
    """Handlers reach the broker's services through ``ctx.services`` (odradek.server.services)."""
    graph = server_import_graph()
    offenders = sorted(
        m for m, targets in graph.items() if m.startswith("odradek.server.apis") and "odradek.server.broker" in targets
    )
    offenders += sorted(
        str(p.relative_to(SRC)) for p in (SERVER / "apis").glob("*.py") if "odradek.server.broker" in p.read_text()
    )
    assert offenders == []
