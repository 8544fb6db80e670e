"""Generated doc tables match the code (run tools/gen_docs.py to refresh them)."""

from __future__ import annotations

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_docs_tables_are_current() -> None:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "tools" / "gen_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for path, text in module.render().items():
        assert path.read_text() == text, f"{path.name} is stale: run tools/gen_docs.py"


def test_compatibility_table_lists_core_apis() -> None:
    text = (ROOT / "docs" / "compatibility.md").read_text()
    for row in ("| 0 | Produce | 3 |", "| 1 | Fetch | 4 |", "| 18 | ApiVersions | 0 |"):
        assert row in text


def test_no_text_file_holds_merge_conflict_markers() -> None:
    markers = ("<<<<<<< ", ">>>>>>> ")
    found = []
    for folder in ("docs", "src", "tests", "bench", "chaos", "tools"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix not in {".md", ".py", ".toml", ".txt"} or not path.is_file():
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if line.startswith(markers) or line == "=======":
                    found.append(f"{path.relative_to(ROOT)}:{n}")
    assert not found, found
