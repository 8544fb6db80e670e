"""Imports flow down the layers of docs/architecture.md; peers on one layer do not import each other."""

from __future__ import annotations

import ast
import pathlib

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
