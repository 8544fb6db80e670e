"""Helpers of the schema registry tests: raw REST calls and a protobuf message class compiled at
test time with grpc_tools' protoc."""

from __future__ import annotations

import importlib
import json
import pathlib
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import httpx

V1 = "application/vnd.schemaregistry.v1+json"


def call(
    base: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    content: bytes | None = None,
    headers: dict[str, str] | None = None,
    auth: tuple[str, str] | None = None,
    verify: Any = True,
) -> tuple[int, Any]:
    """(status, decoded JSON or text) of one request to the registry."""
    hdrs = {"Content-Type": V1, "Accept": V1, **(headers or {})}
    if body is not None:
        content = json.dumps(body).encode()
    answer = httpx.request(method, base + path, content=content, headers=hdrs, auth=auth, timeout=20, verify=verify)
    try:
        return answer.status_code, answer.json()
    except ValueError:
        return answer.status_code, answer.text


def avro_record(name: str, fields: list[dict[str, Any]]) -> str:
    return json.dumps({"type": "record", "name": name, "fields": fields})


def compile_proto(tmp: pathlib.Path, name: str, text: str) -> ModuleType:
    """Compile ``text`` (a .proto file) with protoc into ``tmp`` and import the ``_pb2`` module."""
    from grpc_tools import protoc

    (tmp / f"{name}.proto").write_text(text)
    import grpc_tools

    include = str(pathlib.Path(grpc_tools.__file__).parent / "_proto")
    code = protoc.main(["protoc", f"-I{tmp}", f"-I{include}", f"--python_out={tmp}", f"{name}.proto"])
    assert code == 0, "protoc failed"
    sys.path.insert(0, str(tmp))
    try:
        return importlib.import_module(f"{name}_pb2".replace("/", "."))
    finally:
        sys.path.remove(str(tmp))


def wait_until(condition: Callable[[], Any], timeout_s: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            result = condition()
        except Exception:
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
