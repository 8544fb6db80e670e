"""Confluent Schema Registry's REST API (v1) as a Starlette application.

Every route is wrapped by :func:`_endpoint`, which negotiates the response type, authenticates
(when an :class:`~odradek.schema_registry.auth.Authenticator` is given; writes need a writer
principal), forwards writes to the leader when this instance does not lead, reads the bounded JSON
body, and turns :class:`RestError` into Confluent's ``{"error_code", "message"}`` bodies. An
unexpected exception is logged and answered 500 / 50001 without details.

Threading: the app runs on the event loop of the uvicorn server that hosts it, the same loop as
the :class:`SchemaRegistry` and its store.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from odradek.schema_registry import errors as e
from odradek.schema_registry.leader import LeaderElector
from odradek.schema_registry.records import SchemaValue
from odradek.schema_registry.registry import SchemaRegistry
from odradek.schema_registry.schemas import SCHEMA_TYPES
from odradek.schema_registry.web import JsonResponse, error_response, flag, forward, json_body, media_type, read_body

log = logging.getLogger(__name__)


class Authenticator:
    """Checks a request's credentials; see :mod:`odradek.schema_registry.auth`."""

    async def principal(self, request: Request) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def may_write(self, principal: str) -> bool:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(slots=True)
class Context:
    registry: SchemaRegistry
    leader: LeaderElector
    authenticator: Authenticator | None
    max_request_bytes: int
    client: httpx.AsyncClient


@dataclass(slots=True)
class Call:
    request: Request
    params: dict[str, str]
    body: Any

    def flag(self, name: str) -> bool:
        return flag(self.request, name)


Handler = Callable[[SchemaRegistry, Call], Awaitable[Any]]


def _endpoint(
    ctx: Context, handler: Handler, *, write: bool = False, body: bool = False
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        media = "application/vnd.schemaregistry.v1+json"
        try:
            media = media_type(request)
            if ctx.authenticator is not None:
                principal = await ctx.authenticator.principal(request)
                if write and not ctx.authenticator.may_write(principal):
                    raise e.Forbidden(f"User {principal} is denied operation Write on this schema registry")
            if write and not ctx.leader.is_leader:
                raw = await read_body(request, ctx.max_request_bytes) if body else b""
                if ctx.leader.leader_url in (None, ctx.leader.own_url):
                    raise e.UnknownLeader("Request failed since the schema registry leader is not known")
                return await forward(ctx.client, ctx.leader.leader_url, request, raw)
            parsed = await json_body(request, ctx.max_request_bytes) if body else None
            result = await handler(ctx.registry, Call(request, dict(request.path_params), parsed))
            if isinstance(result, Response):
                return result
            return JsonResponse(result, 200, media)
        except e.RestError as error:
            return error_response(error, media)
        except Exception:
            log.exception("schema registry: %s %s failed", request.method, request.url.path)
            return error_response(e.StoreError("Internal Server Error"), media)

    return endpoint


def _schema_json(value: SchemaValue, *, with_subject: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if with_subject:
        out.update(subject=value.subject, version=value.version, id=value.id)
    if value.schema_type != "AVRO":
        out["schemaType"] = value.schema_type
    if value.references:
        out["references"] = value.references
    if value.metadata is not None:
        out["metadata"] = value.metadata
    if value.rule_set is not None:
        out["ruleSet"] = value.rule_set
    out["schema"] = value.schema
    return out


def _int(text: str, error: type[e.RestError]) -> int:
    try:
        return int(text)
    except ValueError:
        raise error() from None


# --- handlers -------------------------------------------------------------------------------


async def root(r: SchemaRegistry, c: Call) -> Any:
    return {}


async def schema_types(r: SchemaRegistry, c: Call) -> Any:
    return sorted(SCHEMA_TYPES, key=lambda t: (t != "JSON", t != "PROTOBUF"))


async def list_schemas(r: SchemaRegistry, c: Call) -> Any:
    prefix = c.request.query_params.get("subjectPrefix", "")
    deleted, latest = c.flag("deleted"), c.flag("latestOnly")
    out = []
    for subject in r.state.subjects(deleted=deleted):
        if subject.startswith(prefix):
            versions = r.state.live_versions(subject, deleted=deleted)
            out += [_schema_json(v) for v in (versions[-1:] if latest else versions)]
    return out


async def schema_by_id(r: SchemaRegistry, c: Call) -> Any:
    value = r.schema_by_id(_int(c.params["id"], e.SchemaNotFound))
    out = _schema_json(value, with_subject=False)
    if value.schema_type == "PROTOBUF" and c.request.query_params.get("format") == "serialized":
        out["schema"] = (await r.parsed(value)).parsed.serialized()
    return out


async def schema_text_by_id(r: SchemaRegistry, c: Call) -> Any:
    return PlainTextResponse(r.schema_by_id(_int(c.params["id"], e.SchemaNotFound)).schema)


async def id_subjects(r: SchemaRegistry, c: Call) -> Any:
    schema_id = _int(c.params["id"], e.SchemaNotFound)
    r.schema_by_id(schema_id)
    return sorted({v.subject for v in r.state.uses_of(schema_id, deleted=c.flag("deleted"))})


async def id_versions(r: SchemaRegistry, c: Call) -> Any:
    schema_id = _int(c.params["id"], e.SchemaNotFound)
    r.schema_by_id(schema_id)
    return [{"subject": v.subject, "version": v.version} for v in r.state.uses_of(schema_id, deleted=c.flag("deleted"))]


async def subjects(r: SchemaRegistry, c: Call) -> Any:
    prefix = c.request.query_params.get("subjectPrefix", "")
    return [s for s in r.state.subjects(deleted=c.flag("deleted")) if s.startswith(prefix)]


async def versions(r: SchemaRegistry, c: Call) -> Any:
    return [v.version for v in r.subject_versions(c.params["subject"], deleted=c.flag("deleted"))]


async def register(r: SchemaRegistry, c: Call) -> Any:
    return await r.register(c.params["subject"], c.body, normalize=c.flag("normalize"))


async def lookup(r: SchemaRegistry, c: Call) -> Any:
    value = await r.lookup(c.params["subject"], c.body, normalize=c.flag("normalize"), deleted=c.flag("deleted"))
    return _schema_json(value)


async def delete_subject(r: SchemaRegistry, c: Call) -> Any:
    return await r.delete_subject(c.params["subject"], permanent=c.flag("permanent"))


async def get_version(r: SchemaRegistry, c: Call) -> Any:
    return _schema_json(r.get_version(c.params["subject"], c.params["version"], deleted=c.flag("deleted")))


async def latest_with_metadata(r: SchemaRegistry, c: Call) -> Any:
    """``GET /subjects/{s}/metadata?key=k&value=v...``: the latest version whose
    ``metadata.properties`` hold every pair (40403 when none does)."""
    keys = c.request.query_params.getlist("key")
    values = c.request.query_params.getlist("value")
    if len(keys) != len(values):
        raise e.BadRequest("key and value parameters must come in pairs")
    wanted = dict(zip(keys, values, strict=True))
    for value in reversed(r.subject_versions(c.params["subject"], deleted=c.flag("deleted"))):
        props = (value.metadata or {}).get("properties") or {}
        if isinstance(props, dict) and all(props.get(k) == v for k, v in wanted.items()):
            return _schema_json(value)
    raise e.SchemaNotFound(f"Schema with metadata {wanted} not found")


async def get_version_schema(r: SchemaRegistry, c: Call) -> Any:
    value = r.get_version(c.params["subject"], c.params["version"], deleted=c.flag("deleted"))
    return PlainTextResponse(value.schema)


async def referenced_by(r: SchemaRegistry, c: Call) -> Any:
    value = r.get_version(c.params["subject"], c.params["version"])
    return r.state.referenced_by(value.subject, value.version)


async def delete_version(r: SchemaRegistry, c: Call) -> Any:
    return await r.delete_version(c.params["subject"], c.params["version"], permanent=c.flag("permanent"))


async def compatibility(r: SchemaRegistry, c: Call) -> Any:
    messages = await r.compatible(c.params["subject"], c.params.get("version"), c.body, normalize=c.flag("normalize"))
    out: dict[str, Any] = {"is_compatible": not messages}
    if c.flag("verbose"):
        out["messages"] = messages
    return out


async def get_config(r: SchemaRegistry, c: Call) -> Any:
    subject = c.params.get("subject")
    config = r.state.configs.get(subject)
    if config is None and subject is not None:
        if not c.flag("defaultToGlobal"):
            raise e.SubjectConfigNotFound(f"Subject '{subject}' does not have subject-level compatibility configured")
        config = r.state.configs.get(None)
    config = dict(config or {})
    config.setdefault("compatibilityLevel", "BACKWARD")
    return config


async def put_config(r: SchemaRegistry, c: Call) -> Any:
    return await r.set_config(c.params.get("subject"), c.body)


async def delete_config(r: SchemaRegistry, c: Call) -> Any:
    return await r.delete_config(c.params.get("subject"))


async def get_mode(r: SchemaRegistry, c: Call) -> Any:
    subject = c.params.get("subject")
    if subject is not None and subject not in r.state.modes and not c.flag("defaultToGlobal"):
        raise e.SubjectModeNotFound(f"Subject '{subject}' does not have subject-level mode configured")
    return {"mode": r.state.effective_mode(subject)}


async def put_mode(r: SchemaRegistry, c: Call) -> Any:
    return await r.set_mode(c.params.get("subject"), c.body, force=c.flag("force"))


async def delete_mode(r: SchemaRegistry, c: Call) -> Any:
    return await r.delete_mode(c.params["subject"])


async def contexts(r: SchemaRegistry, c: Call) -> Any:
    return ["."]


def build_app(ctx: Context) -> Starlette:
    """The ASGI app; ``ctx.client`` is closed by whoever created it."""

    def route(path: str, handler: Handler, method: str = "GET", *, write: bool = False, body: bool = False) -> Route:
        return Route(path, _endpoint(ctx, handler, write=write, body=body), methods=[method])

    # Subjects may hold "/" (Protobuf references are subjects named after their import path,
    # sent URL-encoded and decoded before routing): they match as paths, and the routes are
    # ordered most specific first so a suffix such as /versions/1 is never taken for a subject.
    S, V = "/subjects/{subject:path}", "/subjects/{subject:path}/versions/{version}"
    C = "/compatibility/subjects/{subject:path}/versions"
    routes = [
        route("/", root),
        route("/schemas", list_schemas),
        route("/schemas/types", schema_types),
        route("/schemas/ids/{id}", schema_by_id),
        route("/schemas/ids/{id}/schema", schema_text_by_id),
        route("/schemas/ids/{id}/subjects", id_subjects),
        route("/schemas/ids/{id}/versions", id_versions),
        route("/subjects", subjects),
        route(f"{V}/schema", get_version_schema),
        route(f"{V}/referencedby", referenced_by),
        route(V, get_version),
        route(V, delete_version, "DELETE", write=True),
        route(f"{S}/versions", versions),
        route(f"{S}/metadata", latest_with_metadata),
        route(f"{S}/versions", register, "POST", write=True, body=True),
        route(S, lookup, "POST", body=True),
        route(S, delete_subject, "DELETE", write=True),
        route(C + "/{version}", compatibility, "POST", body=True),
        route(C, compatibility, "POST", body=True),
        route("/config", get_config),
        route("/config", put_config, "PUT", write=True, body=True),
        route("/config", delete_config, "DELETE", write=True),
        route("/config/{subject:path}", get_config),
        route("/config/{subject:path}", put_config, "PUT", write=True, body=True),
        route("/config/{subject:path}", delete_config, "DELETE", write=True),
        route("/mode", get_mode),
        route("/mode", put_mode, "PUT", write=True, body=True),
        route("/mode/{subject:path}", get_mode),
        route("/mode/{subject:path}", put_mode, "PUT", write=True, body=True),
        route("/mode/{subject:path}", delete_mode, "DELETE", write=True),
        route("/contexts", contexts),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        error = {404: e.NotFound, 405: e.MethodNotAllowed}.get(status, e.StoreError)()
        return error_response(error)

    return Starlette(routes=routes, exception_handlers={HTTPException: http_error})
