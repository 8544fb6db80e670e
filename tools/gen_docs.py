"""Regenerate the generated tables in docs/ (configuration keys, API versions).

Run: .venv/bin/python tools/gen_docs.py  (tests/unit/test_docs_sync.py fails when docs are stale)
"""

from __future__ import annotations

import pathlib
import re

from kio.schema.index import api_key_map

from odradek.configdef import render_markdown_table
from odradek.coordinator.group.group_config import GROUP_CONFIGS
from odradek.protocol import inter_broker_messages
from odradek.server.apis import API_HANDLERS, KAFKA_4_0_MINIMA, KAFKA_4_GROUP_VERSIONS, KAFKA_RELEASE, SERVED_VERSIONS
from odradek.server.config import BROKER_CONFIGS
from odradek.server.dynamic_config import dynamic_config_table
from odradek.storage.config import TOPIC_CONFIGS

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


def compatibility_table() -> str:
    rows = [
        f"| API key | name | min version | max version | Kafka {KAFKA_RELEASE} |",
        "| --- | --- | --- | --- | --- |",
    ]
    for key in sorted(API_HANDLERS):
        module = API_HANDLERS[key]
        if key in api_key_map:
            name = "".join(part.capitalize() for part in api_key_map[key].split("_"))
        else:  # the inter-broker APIs kio lacks
            name = inter_broker_messages.request_class(key, 0).__name__.removesuffix("Request")
        low, high = SERVED_VERSIONS[key]
        note = f"{low}-{high}" + (" (min: Kafka 4.0's)" if key in KAFKA_4_0_MINIMA else "")
        if key in KAFKA_4_GROUP_VERSIONS:
            note = f"none (Kafka 4.2: {low}-{high}, KRaft only)"
        rows.append(f"| {key} | {name} | {module.MIN_VERSION} | {module.MAX_VERSION} | {note} |")
    return "\n".join(rows)


def replace_block(text: str, name: str, content: str) -> str:
    pattern = re.compile(rf"(<!-- BEGIN {name} -->\n)(?:.*?\n)?(<!-- END {name} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"marker {name} missing")
    return pattern.sub(lambda m: m.group(1) + content + "\n" + m.group(2), text)


def render() -> dict[pathlib.Path, str]:
    out = {}
    cfg = DOCS / "configuration.md"
    text = cfg.read_text()
    text = replace_block(text, "BROKER", render_markdown_table(BROKER_CONFIGS))
    text = replace_block(text, "TOPIC", render_markdown_table(TOPIC_CONFIGS))
    text = replace_block(text, "GROUP", render_markdown_table(GROUP_CONFIGS))
    text = replace_block(text, "DYNAMIC", dynamic_config_table())
    out[cfg] = text
    compat = DOCS / "compatibility.md"
    out[compat] = replace_block(compat.read_text(), "APIS", compatibility_table())
    return out


if __name__ == "__main__":
    for path, text in render().items():
        path.write_text(text)
        print(f"wrote {path}")
