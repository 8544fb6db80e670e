"""Group pages: every group (``/groups``), a consumer group of either protocol (``/groups/view?id=``),
its offset reset (``/groups/reset?id=``: choose, preview, confirm) and delete, and a share group
(``/share-groups/view?id=``).

Group ids can hold any character, so they travel as a query parameter (at most
:data:`MAX_GROUP_ID` characters), never in the path. Resets follow Kafka's rules (the group must
be Empty; offsets clamped to [log start, high watermark]): the first POST (``step=preview``) shows
the new offsets, the second (``step=execute``) commits exactly those shown.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from odradek.cli.consumer_groups import RESET_KINDS
from odradek.console import group_data
from odradek.console.app import cluster_call, form_for_change, page
from odradek.console.routes_topics import _int, _timestamp
from odradek.storage.topic_partition import TopicPartition

__all__ = ["ROUTES"]

MAX_GROUP_ID = 1000


def _group_id(value: object) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_GROUP_ID:
        raise HTTPException(400, "a group id (1 to 1000 characters) is required")
    return value


async def groups(request: Request) -> Response:
    p = _int(request.query_params.get("page"), "page", 0) or 0
    q = request.query_params.get("q", "")[:MAX_GROUP_ID]
    rows, total = await cluster_call(request, lambda admin: group_data.group_list(admin, p, q))
    return page(request, "groups.html", groups=rows, total=total, page=p, q=q, page_size=group_data.MAX_GROUPS)


async def group(request: Request) -> Response:
    group_id = _group_id(request.query_params.get("id"))
    view = await cluster_call(request, lambda admin: group_data.group_view(admin, group_id))
    return page(request, "group.html", view=view, gid=quote(group_id, safe=""))


async def reset(request: Request) -> Response:
    if request.method == "GET":
        group_id = _group_id(request.query_params.get("id"))
        return page(
            request, "group_reset.html", group_id=group_id, plan=None, kinds=RESET_KINDS, how="earliest", value=""
        )
    form = await form_for_change(request)
    group_id = _group_id(form.get("id"))
    how = str(form.get("how", ""))
    if how not in RESET_KINDS:
        raise HTTPException(400, f"how must be one of {', '.join(RESET_KINDS)}")
    raw = str(form.get("value", ""))
    value = _timestamp(raw) if how == "timestamp" else _int(raw, "value", -(2**62), 2**62)
    if form.get("step") == "execute":
        offsets: dict[TopicPartition, int] = {}
        for key, text in form.multi_items():
            if key.startswith("offset:"):
                topic, _, partition = key[len("offset:") :].rpartition(":")
                number = _int(str(text), "offset", 0)
                part = _int(partition, "partition", 0)
                if not topic or number is None or part is None:
                    raise HTTPException(400, f"bad offset field {key}")
                offsets[TopicPartition(topic, part)] = number
        if not offsets:
            raise HTTPException(400, "nothing to reset")
        await cluster_call(request, lambda admin: group_data.reset_group(admin, group_id, offsets))
        return RedirectResponse(f"/groups/view?id={quote(group_id, safe='')}", status_code=303)
    plan = await cluster_call(request, lambda admin: group_data.plan_group_reset(admin, group_id, how, value))
    return page(
        request, "group_reset.html", group_id=group_id, plan=sorted(plan.items()), kinds=RESET_KINDS, how=how, value=raw
    )


async def delete(request: Request) -> Response:
    if request.method == "GET":
        group_id = _group_id(request.query_params.get("id"))
        return page(request, "group_delete.html", group_id=group_id, error=None)
    form = await form_for_change(request)
    group_id = _group_id(form.get("id"))
    if form.get("confirm") != group_id:
        return page(request, "group_delete.html", 400, group_id=group_id, error="Type the group id to confirm.")
    await cluster_call(request, lambda admin: group_data.delete_group(admin, group_id))
    return RedirectResponse("/groups", status_code=303)


async def share_group(request: Request) -> Response:
    group_id = _group_id(request.query_params.get("id"))
    view = await cluster_call(request, lambda admin: group_data.share_group_view(admin, group_id))
    return page(request, "share_group.html", view=view)


ROUTES = [
    Route("/groups", groups),
    Route("/groups/view", group),
    Route("/groups/reset", reset, methods=["GET", "POST"]),
    Route("/groups/delete", delete, methods=["GET", "POST"]),
    Route("/share-groups/view", share_group),
]
