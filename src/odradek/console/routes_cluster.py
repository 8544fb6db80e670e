"""Cluster pages: overview (``/``), the throughput feed (``/api/throughput``), brokers and log dirs,
reassignments in progress, transactions, and the schema registry's subjects (``--schema-registry-url``).

The overview auto-refreshes its tables with ``?refresh=SECONDS`` (at least 10) and its chart polls
``/api/throughput`` every 5 s; both are bounded (see :mod:`.metrics`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from odradek.console import cluster_data
from odradek.console.app import cluster_call, console_of, page
from odradek.metadata.errors import CoordinationError

__all__ = ["ROUTES"]

MIN_REFRESH_S = 10
ZOOKEEPER_TIMEOUT_S = 10.0
REGISTRY_TIMEOUT_S = 5.0
MAX_REGISTRY_BYTES = 1024 * 1024


async def overview(request: Request) -> Response:
    view = await cluster_call(request, cluster_data.overview)
    refresh = request.query_params.get("refresh", "")
    seconds = max(MIN_REFRESH_S, int(refresh)) if refresh.isdigit() else None
    urls = console_of(request).config.metrics_urls
    return page(request, "overview.html", view=view, refresh=seconds, metrics_urls=urls)


async def throughput(request: Request) -> Response:
    return JSONResponse(await console_of(request).throughput.poll())


async def brokers(request: Request) -> Response:
    rows = await cluster_call(request, cluster_data.brokers_and_log_dirs)
    console = console_of(request)
    zookeeper, zk_error = None, None
    if console.zookeeper is not None:
        try:
            zookeeper = await console.clients.call(console.zookeeper.read, ZOOKEEPER_TIMEOUT_S)
        except (CoordinationError, TimeoutError) as exc:
            zk_error = f"{type(exc).__name__}: {exc}"
    return page(request, "brokers.html", brokers=rows, zookeeper=zookeeper, zk_error=zk_error)


async def broker(request: Request) -> Response:
    raw = request.path_params["broker_id"]
    broker_id = int(raw)
    configs = await cluster_call(request, lambda admin: cluster_data.broker_configs(admin, broker_id))
    return page(request, "broker.html", broker_id=broker_id, configs=configs)


async def reassignments(request: Request) -> Response:
    rows = await cluster_call(request, cluster_data.reassignments)
    return page(request, "reassignments.html", moves=rows)


async def transactions(request: Request) -> Response:
    rows = await cluster_call(request, cluster_data.transaction_list)
    return page(request, "transactions.html", transactions=rows)


async def _registry_get(request: Request, path: str) -> Any:
    """GET ``path`` of the schema registry (Confluent's REST API) as JSON; 502 on failure."""
    base = console_of(request).config.schema_registry_url
    if base is None:
        raise HTTPException(404, "no --schema-registry-url given")
    try:
        async with httpx.AsyncClient(timeout=REGISTRY_TIMEOUT_S) as client:
            response = await client.get(
                base.rstrip("/") + path, headers={"Accept": "application/vnd.schemaregistry.v1+json"}
            )
        if len(response.content) > MAX_REGISTRY_BYTES:
            raise HTTPException(502, "the schema registry's answer is too large")
        if response.status_code != 200:
            raise HTTPException(502, f"the schema registry answered {response.status_code}: {response.text[:300]}")
        return response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise HTTPException(502, f"cannot read the schema registry: {exc}") from None


async def subjects(request: Request) -> Response:
    names = await _registry_get(request, "/subjects")
    return page(request, "subjects.html", subjects=sorted(str(n) for n in names)[:1000])


async def subject(request: Request) -> Response:
    name = request.path_params["subject"]
    versions = await _registry_get(request, f"/subjects/{quote(name, safe='')}/versions")
    version = request.query_params.get("version", "latest")
    if version != "latest" and not version.isdigit():
        raise HTTPException(400, "version must be a number or latest")
    schema = await _registry_get(request, f"/subjects/{quote(name, safe='')}/versions/{version}")
    return page(request, "subject.html", subject=name, versions=versions, schema=schema)


ROUTES = [
    Route("/", overview),
    Route("/api/throughput", throughput),
    Route("/brokers", brokers),
    Route("/brokers/{broker_id:int}", broker),
    Route("/reassignments", reassignments),
    Route("/transactions", transactions),
    Route("/registry", subjects),
    Route("/registry/{subject:path}", subject),
]
