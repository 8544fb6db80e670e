"""HTTP plumbing of the REST API: content negotiation, bounded JSON bodies, Confluent's error
bodies, and forwarding a write to the leader.

Requests: ``Content-Type`` may be ``application/vnd.schemaregistry.v1+json``,
``application/vnd.schemaregistry+json``, ``application/json`` or ``application/octet-stream``
(Confluent's "generic request"; also assumed when absent), with any parameters; anything else is
415. Responses take the first of the three JSON types the ``Accept`` header allows (``*/*`` or no
header: the v1 type); none allowed is 406. A body longer than the limit is refused with 413 from
its ``Content-Length`` or, chunked, as soon as the bytes read pass it; a body that is not JSON is
400 (error_code 400, as Confluent's JSON parse error mapper answers), and so is a JSON value of
the wrong shape (its JSON mapping error mapper's answer).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import Response

from odradek.schema_registry import errors as e

log = logging.getLogger(__name__)

V1_JSON = "application/vnd.schemaregistry.v1+json"
DEFAULT_JSON = "application/vnd.schemaregistry+json"
JSON = "application/json"
RESPONSE_TYPES = (V1_JSON, DEFAULT_JSON, JSON)
REQUEST_TYPES = (*RESPONSE_TYPES, "application/octet-stream")


def media_type(request: Request) -> str:
    """The response type for ``request``'s Accept header; 406 when none fits."""
    accept = request.headers.get("accept", "")
    if not accept.strip():
        return V1_JSON
    offered = []
    for part in accept.split(","):
        fields = [f.strip() for f in part.split(";")]
        q = 1.0
        for f in fields[1:]:
            if f.startswith("q="):
                try:
                    q = float(f[2:])
                except ValueError:
                    q = 0.0
        if q > 0:
            offered.append((-q, fields[0].lower()))
    for _, kind in sorted(offered, key=lambda x: x[0]):
        if kind in ("*/*", "application/*"):
            return V1_JSON
        if kind in RESPONSE_TYPES:
            return kind
    raise e.NotAcceptable()


class JsonResponse(Response):
    """A JSON body (compact, as Jackson writes it) with a registry content type."""

    def __init__(self, content: Any, status_code: int = 200, media: str = V1_JSON) -> None:
        super().__init__(json.dumps(content, separators=(",", ":")).encode(), status_code, media_type=media)


def error_response(error: e.RestError, media: str = V1_JSON) -> Response:
    response = JsonResponse(error.body(), error.status, media if media in RESPONSE_TYPES else V1_JSON)
    if error.status == 401:
        response.headers["WWW-Authenticate"] = 'Basic realm="SchemaRegistry"'
    return response


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, at most ``limit`` bytes (413 beyond), after the Content-Type check (415)."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type and content_type not in REQUEST_TYPES:
        raise e.UnsupportedMediaType()
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > limit:
                raise e.PayloadTooLarge(f"Request body of {declared} bytes exceeds the limit of {limit} bytes")
        except ValueError:
            raise e.BadRequest("Invalid Content-Length") from None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise e.PayloadTooLarge(f"Request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def json_body(request: Request, limit: int) -> Any:
    raw = await read_body(request, limit)
    if not raw.strip():
        raise e.BadRequest("Request body is empty")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise e.BadRequest(f"Unrecognized JSON body: {exc}") from None
    except RecursionError:
        raise e.BadRequest("JSON body nested too deeply") from None


def flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


async def forward(client: httpx.AsyncClient, leader_url: str, request: Request, body: bytes) -> Response:
    """Send ``request`` (with ``body``) to the leader and relay its answer; 50003 if it cannot be reached."""
    headers = {k: v for k, v in request.headers.items() if k in ("content-type", "accept", "authorization")}
    url = leader_url.rstrip("/") + request.url.path
    try:
        answer = await client.request(request.method, url, params=request.query_params, content=body, headers=headers)
    except httpx.HTTPError as exc:
        log.warning("forwarding %s %s to %s failed: %s", request.method, request.url.path, leader_url, exc)
        raise e.ForwardingError(f"Error while forwarding the request to the leader {leader_url}: {exc}") from None
    media = answer.headers.get("content-type", V1_JSON)
    return Response(answer.content, answer.status_code, media_type=media)
