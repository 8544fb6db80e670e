"""Topic pages: the list (``/topics``), one topic (``/topics/{name}``), its messages, create and delete.

Create: ``GET /topics/new`` is the form, ``POST /topics/new`` creates. Delete takes a confirmation
step: ``GET /topics/{name}/delete`` asks to type the topic's name again, ``POST`` deletes only when
it matches. Both POSTs pass the CSRF and read-only checks first.

Message browsing (``/topics/{name}/messages``): ``partition`` (empty: all), ``offset`` or
``timestamp`` (ISO 8601 or ms), ``from=end`` for the newest, ``limit`` (at most
:data:`~odradek.console.topic_data.MAX_MESSAGES`), ``format`` (text, json, hex) and ``max_bytes`` (at
most :data:`~odradek.console.topic_data.MAX_VALUE_BYTES`) per key, value and header.
"""

from __future__ import annotations

import datetime
import re

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from odradek.console import topic_data
from odradek.console.app import cluster_call, form_for_change, page
from odradek.console.render import FORMATS, show

__all__ = ["ROUTES"]

TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
DEFAULT_VALUE_BYTES = 4096


def _int(text: str | None, what: str, low: int, high: int | None = None) -> int | None:
    """``text`` as an int in [low, high]; None when empty; 400 when not a number or out of range."""
    if text is None or text.strip() == "":
        return None
    try:
        value = int(text.strip())
    except ValueError:
        raise HTTPException(400, f"{what} must be a whole number") from None
    if value < low or (high is not None and value > high):
        raise HTTPException(400, f"{what} must be between {low} and {high if high is not None else 'any'}")
    return value


def _topic(request: Request) -> str:
    name = str(request.path_params["name"])
    if not TOPIC_NAME.fullmatch(name):
        raise HTTPException(400, "not a valid topic name")
    return name


async def topics(request: Request) -> Response:
    p = _int(request.query_params.get("page"), "page", 0) or 0
    name_filter = request.query_params.get("q", "")[:249]
    rows, total = await cluster_call(request, lambda admin: topic_data.topic_rows(admin, p, name_filter))
    return page(
        request, "topics.html", topics=rows, total=total, page=p, q=name_filter, page_size=topic_data.MAX_TOPICS
    )


async def topic(request: Request) -> Response:
    name = _topic(request)
    detail = await cluster_call(request, lambda admin: topic_data.topic_detail(admin, name))
    return page(request, "topic.html", topic=detail)


def _timestamp(text: str | None) -> int | None:
    if text is None or not text.strip():
        return None
    text = text.strip()
    if text.lstrip("-").isdigit():
        return _int(text, "timestamp", 0)
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise HTTPException(400, "timestamp must be ISO 8601 (2024-01-31T12:00:00Z) or ms since the epoch") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return int(when.timestamp() * 1000)


async def messages(request: Request) -> Response:
    name = _topic(request)
    q = request.query_params
    partition = _int(q.get("partition"), "partition", 0, 1_000_000)
    offset = _int(q.get("offset"), "offset", 0)
    timestamp_ms = _timestamp(q.get("timestamp"))
    limit = _int(q.get("limit"), "limit", 1, topic_data.MAX_MESSAGES) or 50
    max_bytes = _int(q.get("max_bytes"), "max_bytes", 1, topic_data.MAX_VALUE_BYTES) or DEFAULT_VALUE_BYTES
    fmt = q.get("format", "text")
    if fmt not in FORMATS:
        raise HTTPException(400, f"format must be one of {', '.join(FORMATS)}")
    from_end = q.get("from") == "end"
    result = await cluster_call(
        request,
        lambda admin: topic_data.browse(
            admin, name, partition, offset=offset, timestamp_ms=timestamp_ms, from_end=from_end, limit=limit
        ),
    )
    rows = [
        {
            "partition": r.partition,
            "offset": r.offset,
            "timestamp": r.timestamp_ms,
            "key": show(r.key, fmt, max_bytes),
            "value": show(r.value, fmt, max_bytes),
            "headers": [(h[:256], show(v, fmt, max_bytes)) for h, v in r.headers[:64]],
        }
        for r in result.records
    ]
    return page(
        request,
        "messages.html",
        topic=name,
        rows=rows,
        result=result,
        params={
            "partition": "" if partition is None else partition,
            "offset": "" if offset is None else offset,
            "timestamp": q.get("timestamp", "")[:64],
            "limit": limit,
            "max_bytes": max_bytes,
            "format": fmt,
            "from": "end" if from_end else "",
        },
        formats=FORMATS,
    )


async def new_topic(request: Request) -> Response:
    if request.method == "GET":
        return page(request, "topic_new.html", error=None, values={})
    form = await form_for_change(request)
    values = {k: str(form.get(k, "")) for k in ("name", "partitions", "replication_factor", "configs")}
    name = values["name"].strip()
    if not TOPIC_NAME.fullmatch(name) or name in (".", ".."):
        return page(
            request, "topic_new.html", 400, error="Topic names use 1 to 249 of a-z A-Z 0-9 . _ -", values=values
        )
    try:
        partitions = _int(values["partitions"], "partitions", 1, 100000) or -1
        replication = _int(values["replication_factor"], "replication factor", 1, 100) or -1
    except HTTPException as exc:
        return page(request, "topic_new.html", 400, error=exc.detail, values=values)
    configs: dict[str, str] = {}
    for line in values["configs"].splitlines()[:200]:
        if line.strip():
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                return page(
                    request, "topic_new.html", 400, error=f"config line {line!r}: expected key=value", values=values
                )
            configs[key.strip()] = value.strip()
    await cluster_call(request, lambda admin: topic_data.create_topic(admin, name, partitions, replication, configs))
    return RedirectResponse(f"/topics/{name}", status_code=303)


async def delete_topic(request: Request) -> Response:
    name = _topic(request)
    if request.method == "GET":
        return page(request, "topic_delete.html", topic=name, error=None)
    form = await form_for_change(request)
    if form.get("confirm") != name:
        return page(request, "topic_delete.html", 400, topic=name, error="Type the topic's name to confirm.")
    await cluster_call(request, lambda admin: topic_data.delete_topic(admin, name))
    return RedirectResponse("/topics", status_code=303)


ROUTES = [
    Route("/topics", topics),
    Route("/topics/new", new_topic, methods=["GET", "POST"]),
    Route("/topics/{name}", topic),
    Route("/topics/{name}/messages", messages),
    Route("/topics/{name}/delete", delete_topic, methods=["GET", "POST"]),
]
