"""ConsumerGroupHeartbeat (KIP-848): joining, leaving, reconciling and expiring the members of
next-generation consumer groups, as Kafka 4.x's ``GroupMetadataManager.consumerGroupHeartbeat``.

One heartbeat does everything a member needs (there is no JoinGroup or SyncGroup):

- ``member_epoch`` 0 joins (the member id is the client's from v1; v0 without one gets a new id);
  -1 leaves; -2 leaves as a static member that will come back. A join must carry the rebalance
  timeout, the subscription (topic names) and the owned partitions (empty); otherwise
  INVALID_REQUEST. An unknown ``server_assignor`` is UNSUPPORTED_ASSIGNOR.
- Any other epoch must be the member's: an unknown member is UNKNOWN_MEMBER_ID; an epoch ahead
  of the member's, or behind it other than its previous epoch with owned partitions it still has,
  is FENCED_MEMBER_EPOCH (the member then rejoins with epoch 0).
- A new member or a changed subscription (or a subscribed topic whose partition count changed)
  bumps the group epoch; the target assignment is computed again by the group's assignor; the
  member reconciles (:meth:`ConsumerGroup.reconcile`). The answer carries the member's epoch, the
  heartbeat interval and, when it changed or the member's owned partitions differ from it, the
  assignment.
- Timers: ``group.consumer.session.timeout.ms`` after its last heartbeat a member is removed; a
  member asked to revoke partitions that has not done so ``rebalance_timeout_ms`` later is fenced
  (removed). Either bumps the group epoch, so the others converge at their next heartbeats. A
  group's ``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms`` configs
  (:mod:`.group_config`) replace the broker's, read at every heartbeat.
- Regular expressions (``SubscribedTopicRegex``) match every topic but the internal ones, whole
  names only. With an authorizer, the topics a regex matched are only those the principal of the
  member that subscribed with it may DESCRIBE (Kafka resolves with the heartbeating member's
  principal): the heartbeat carries that principal's filter, and a regex is resolved again at every
  heartbeat of a member using it; without one, every regex of the group at every heartbeat.
- A static member (``instance_id``) that leaves with -2 keeps its place for the session timeout; a
  member joining with the same instance id takes over its assignment and epoch (KIP-345 as
  KIP-848 keeps it). A different member id with an instance id in use by a live member is
  UNRELEASED_INSTANCE_ID.

Members of the classic protocol (:mod:`.consumer_classic`) share the groups: their session timer
runs on their own session timeout, and instead of the revocation timer they have a deadline to
rejoin and one to sync (:meth:`ConsumerGroupMembership.schedule_classic_timeout`). A member that
leaves for good goes through :meth:`ConsumerGroupMembership.fence`, where the group may become a
classic group again (:mod:`.migration`).

Groups live on the coordinator of their ``__consumer_offsets`` partition; the coordinator writes
each change to that partition (:mod:`.consumer_persistence`) and a new coordinator loads them, so
members keep their epochs and assignments across a coordinator's move. Committed offsets are
written as for classic groups.

Event loop only; timers run on it.
"""

from __future__ import annotations

import functools
import logging
import re
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Set
from dataclasses import dataclass, field

from odradek.coordinator.group.consumer_assignment import ASSIGNORS, assign
from odradek.coordinator.group.consumer_group import Assignment, ConsumerGroup, ConsumerGroupMember, MemberState
from odradek.coordinator.group.group_config import ConsumerGroupMigrationPolicy, GroupConfig
from odradek.coordinator.runtime import CallLater, ConfigSource, Timer
from odradek.errors import ErrorCode

__all__ = [
    "ConsumerGroupConfig",
    "ConsumerGroupMembership",
    "ConsumerHeartbeat",
    "ConsumerHeartbeatResult",
    "TopicFilter",
]

log = logging.getLogger(__name__)

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

TopicFilter = Callable[[Iterable[str]], Set[str]]
"""The topics among some names a member's principal may DESCRIBE (the authorizer's answer)."""


ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}
"""Kafka's class names of the assignors, accepted in ``group.consumer.assignors``."""


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    """The ``group.consumer.*`` keys."""

    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")
    """The assignors members may ask for; the first is the default."""
    migration_policy: ConsumerGroupMigrationPolicy = ConsumerGroupMigrationPolicy.BIDIRECTIONAL
    """``group.consumer.migration.policy``: the online conversions allowed (:mod:`.migration`)."""

    @classmethod
    def from_broker(cls, config: ConfigSource) -> ConsumerGroupConfig:
        """From a KafkaConfig; ValueError when the timeouts contradict each other (as Kafka's
        ``GroupCoordinatorConfig`` checks them) or an assignor is unknown."""
        session = int(config["group.consumer.session.timeout.ms"])
        heartbeat = int(config["group.consumer.heartbeat.interval.ms"])
        checks = (
            ("group.consumer.session.timeout.ms", session, "group.consumer.min.session.timeout.ms", ">="),
            ("group.consumer.session.timeout.ms", session, "group.consumer.max.session.timeout.ms", "<="),
            ("group.consumer.heartbeat.interval.ms", heartbeat, "group.consumer.min.heartbeat.interval.ms", ">="),
            ("group.consumer.heartbeat.interval.ms", heartbeat, "group.consumer.max.heartbeat.interval.ms", "<="),
        )
        for key, value, bound_key, op in checks:
            bound = int(config[bound_key])
            if (op == ">=" and value < bound) or (op == "<=" and value > bound):
                raise ValueError(f"{key} = {value} must be {op} {bound_key} = {bound}")
        if heartbeat >= session:
            raise ValueError(
                f"group.consumer.heartbeat.interval.ms = {heartbeat} must be < "
                f"group.consumer.session.timeout.ms = {session}"
            )
        raw = config["group.consumer.assignors"]
        names = tuple(
            ASSIGNOR_CLASSES.get(n.strip(), n.strip()) for n in (raw if isinstance(raw, list) else str(raw).split(","))
        )
        unknown = [n for n in names if n not in ASSIGNORS]
        if unknown or not names:
            raise ValueError(f"group.consumer.assignors: unknown assignors {unknown} (known: {sorted(ASSIGNORS)})")
        policy = ConsumerGroupMigrationPolicy.parse(str(config["group.consumer.migration.policy"]))
        return cls(session, heartbeat, int(config["group.consumer.max.size"]), names, policy)


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeat:
    """A ConsumerGroupHeartbeat's fields (None: not sent, unchanged since the last heartbeat)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    version: int = 1
    authorized_topics: TopicFilter | None = field(default=None, compare=False)
    """With an authorizer: the DESCRIBE filter of the heartbeating principal, which the member's
    regex is resolved with; None: no authorizer."""


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatResult:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


class ConsumerGroupMembership:
    """See the module docstring."""

    def __init__(
        self,
        config: ConsumerGroupConfig,
        call_later: CallLater,
        on_change: Callable[[str], None] | None = None,
        group_config: Callable[[str], GroupConfig] | None = None,
        time_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.config = config
        self.call_later = call_later
        self.on_change = on_change
        """Told the group id after a timer changed a group (a member expired or was fenced)."""
        self.group_config = group_config
        """A group's configs (overrides over the broker's); None: the broker's for every group."""
        self.time_ms = time_ms
        self.groups: dict[str, ConsumerGroup] = {}
        self.downgrade: Callable[[ConsumerGroup, str], bool] | None = None
        """Asked before a member is fenced (left with epoch -1, expired, did not revoke, a classic
        member that did not join or sync in time) whether the group became a classic group
        instead (:mod:`.migration`); it then is no consumer group any more."""
        self._session_timers: dict[tuple[str, str], Timer] = {}
        self._rebalance_timers: dict[tuple[str, str], Timer] = {}
        self._join_timers: dict[tuple[str, str], Timer] = {}
        self._sync_timers: dict[tuple[str, str], Timer] = {}
        """A classic member's deadlines to rejoin (after REBALANCE_IN_PROGRESS) and to sync."""

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def session_timeout_ms(self, group_id: str) -> int:
        """The group's ``consumer.session.timeout.ms`` (the broker's when it sets none)."""
        if self.group_config is None:
            return self.config.session_timeout_ms
        return self.group_config(group_id).consumer_session_timeout_ms

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's ``consumer.heartbeat.interval.ms`` (the broker's when it sets none)."""
        if self.group_config is None:
            return self.config.heartbeat_interval_ms
        return self.group_config(group_id).consumer_heartbeat_interval_ms

    def has_members(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    # --- the heartbeat -----------------------------------------------------------------------

    def heartbeat(self, req: ConsumerHeartbeat, topics: Mapping[str, int]) -> ConsumerHeartbeatResult:
        """Answer one heartbeat; ``topics``: the partition count of every topic the cluster has."""
        error = self.validate(req)
        if error is not None:
            log.info("consumer group %s: heartbeat of member %s refused: %s", req.group_id, req.member_id, error[1])
            return ConsumerHeartbeatResult(error[0], error[1])
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(req, topics)
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_epoch != JOIN_EPOCH:
                return ConsumerHeartbeatResult(ErrorCode.unknown_member_id, f"unknown member {req.member_id}")
            group = self.groups[req.group_id] = ConsumerGroup(req.group_id, self.config.assignors[0])
        member_id = req.member_id or str(uuid.uuid4())
        member = group.members.get(member_id)
        bump = False
        if req.member_epoch == JOIN_EPOCH:
            if member is None:
                taken = self._static_takeover(group, req, member_id)
                if isinstance(taken, ConsumerHeartbeatResult):
                    return taken
                if taken is None and len(group.members) >= self.config.max_size:
                    return ConsumerHeartbeatResult(
                        ErrorCode.group_max_size_reached, f"group {group.group_id} has {len(group.members)} members"
                    )
                member = taken or ConsumerGroupMember(member_id)
                bump = taken is None
                group.members[member_id] = member
        elif member is None:
            return ConsumerHeartbeatResult(ErrorCode.unknown_member_id, f"unknown member {member_id}")
        else:
            fenced = _check_epoch(member, req)
            if fenced is not None:
                return ConsumerHeartbeatResult(ErrorCode.fenced_member_epoch, fenced)
        bump |= self._update_member(member, req)
        if req.authorized_topics is None:
            resolve_regexes(group, topics, now_ms=self.time_ms())
        else:
            mine = () if member.subscribed_topic_regex is None else (member.subscribed_topic_regex,)
            resolve_regexes(group, topics, req.authorized_topics, mine, self.time_ms())
        subscribed = {t: topics[t] for t in group.subscribed_topic_names() if t in topics}
        if bump or subscribed != group.subscribed_topics:
            group.bump_epoch(subscribed)
            log.info(
                "consumer group %s: epoch %d (%d members, member %s)",
                group.group_id,
                group.group_epoch,
                len(group.members),
                member_id,
            )
        group.maybe_update_target(assign)
        owned = req.owned if req.member_epoch != JOIN_EPOCH else (req.owned or {})
        assigned_before = member.assigned
        group.reconcile(member, owned)
        self.schedule_session(group, member)
        self._schedule_revocation(group, member)
        # Kafka's rule: a joining member, a full request (after an error), or a changed assignment
        full = req.rebalance_timeout_ms > 0 and req.subscribed_topic_names is not None and req.owned is not None
        send = req.member_epoch == JOIN_EPOCH or full or member.assigned != assigned_before
        return ConsumerHeartbeatResult(
            member_id=member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
            assignment=dict(member.assigned) if send else None,
        )

    def validate(self, req: ConsumerHeartbeat) -> tuple[ErrorCode, str] | None:
        """(error, message) for a heartbeat whose fields are invalid whatever the group; None if valid."""
        if not req.group_id:
            return ErrorCode.invalid_group_id, "the group id is empty"
        if req.version >= 1 and not req.member_id:
            return ErrorCode.invalid_request, "MemberId can't be empty."
        if req.member_epoch < STATIC_LEAVE_EPOCH:
            return ErrorCode.invalid_request, f"MemberEpoch {req.member_epoch} is invalid."
        if req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
            return ErrorCode.invalid_request, "InstanceId can't be null when MemberEpoch is -2."
        if req.member_epoch == JOIN_EPOCH:
            if req.rebalance_timeout_ms <= 0:
                return ErrorCode.invalid_request, "RebalanceTimeoutMs must be provided in first request."
            if req.owned is None or any(req.owned.values()):
                return ErrorCode.invalid_request, "TopicPartitions must be empty when (re-)joining."
            if not req.subscribed_topic_names and req.subscribed_topic_regex is None:
                return (
                    ErrorCode.invalid_request,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                )
        if req.subscribed_topic_regex is not None:
            try:
                compile_regex(req.subscribed_topic_regex)
            except re.error as exc:
                return (
                    ErrorCode.invalid_regular_expression,
                    f"SubscribedTopicRegex {req.subscribed_topic_regex!r}: {exc}",
                )
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            return ErrorCode.unsupported_assignor, f"ServerAssignor {req.server_assignor} is not supported."
        return None

    def _static_takeover(
        self, group: ConsumerGroup, req: ConsumerHeartbeat, member_id: str
    ) -> ConsumerGroupMember | ConsumerHeartbeatResult | None:
        """A static member joining again: the member it replaces, moved to ``member_id`` (None:
        not static, or no member with its instance id)."""
        if req.instance_id is None:
            return None
        old = next((m for m in group.members.values() if m.instance_id == req.instance_id), None)
        if old is None:
            return None
        if old.member_epoch != STATIC_LEAVE_EPOCH and old.classic is None:  # a classic one is replaced
            return ConsumerHeartbeatResult(
                ErrorCode.unreleased_instance_id,
                f"instance id {req.instance_id} is in use by member {old.member_id}",
            )
        self.cancel_timers(group.group_id, old.member_id)
        del group.members[old.member_id]
        target = group.target.pop(old.member_id, {})
        group.target[member_id] = target
        old.member_id = member_id
        if old.classic is None:
            old.member_epoch = old.previous_member_epoch
        return old

    def _update_member(self, member: ConsumerGroupMember, req: ConsumerHeartbeat) -> bool:
        """Apply what the heartbeat sent; whether the subscription changed."""
        changed = False
        if req.instance_id is not None:
            member.instance_id = req.instance_id
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.subscribed_topic_names is not None:
            names = tuple(sorted(set(req.subscribed_topic_names)))
            changed = names != member.subscribed_topic_names
            member.subscribed_topic_names = names
        if req.subscribed_topic_regex is not None:
            regex = req.subscribed_topic_regex or None  # an empty one unsubscribes the regex
            changed |= regex != member.subscribed_topic_regex
            member.subscribed_topic_regex = regex
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            changed = True
        member.client_id = req.client_id or member.client_id
        member.client_host = req.client_host or member.client_host
        member.classic = None  # it speaks the consumer protocol now
        return changed

    def _leave(self, req: ConsumerHeartbeat, topics: Mapping[str, int]) -> ConsumerHeartbeatResult:
        group = self.groups.get(req.group_id)
        member = group.members.get(req.member_id) if group is not None else None
        if group is None or member is None:
            return ConsumerHeartbeatResult(ErrorCode.unknown_member_id, f"unknown member {req.member_id}")
        if req.member_epoch == STATIC_LEAVE_EPOCH:  # keeps its place until its session expires
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
            self.cancel_timers(group.group_id, member.member_id)
            self.schedule_session(group, member)
        else:
            self.fence(group, req.member_id, "left the group", topics)
        return ConsumerHeartbeatResult(member_id=req.member_id, member_epoch=req.member_epoch)

    # --- removal and timers ------------------------------------------------------------------

    def fence(self, group: ConsumerGroup, member_id: str, reason: str, topics: Mapping[str, int] | None = None) -> None:
        """A member leaves for good: the group becomes a classic group if :attr:`downgrade` says so,
        else the member is removed (:meth:`remove`)."""
        if self.downgrade is None or not self.downgrade(group, member_id):
            self.remove(group, member_id, reason, topics)

    def remove(
        self, group: ConsumerGroup, member_id: str, reason: str, topics: Mapping[str, int] | None = None
    ) -> None:
        """Drop a member; the group epoch moves on (a group left empty stays, with its epoch)."""
        self.remove_members(group, (member_id,), reason, topics)

    def remove_members(
        self, group: ConsumerGroup, member_ids: Iterable[str], reason: str, topics: Mapping[str, int] | None = None
    ) -> None:
        """Drop members; the group epoch moves on once if any was there."""
        removed = []
        for member_id in member_ids:
            self.cancel_timers(group.group_id, member_id)
            if group.remove_member(member_id) is not None:
                removed.append(member_id)
        if not removed:
            return
        forget_unused_regexes(group)
        subscribed = (
            {t: n for t, n in group.subscribed_topics.items() if t in group.subscribed_topic_names()}
            if topics is None
            else {t: topics[t] for t in group.subscribed_topic_names() if t in topics}
        )
        group.bump_epoch(subscribed)
        log.info("consumer group %s: members %s %s; epoch %d", group.group_id, removed, reason, group.group_epoch)

    def member_session_timeout_ms(self, group_id: str, member: ConsumerGroupMember) -> int:
        """A classic member's own session timeout (its JoinGroup's), else the group's."""
        return member.classic.session_timeout_ms if member.classic is not None else self.session_timeout_ms(group_id)

    def schedule_session(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """(Re)start the member's session timer."""
        key = (group.group_id, member.member_id)
        old = self._session_timers.pop(key, None)
        if old is not None:
            old.cancel()
        self._session_timers[key] = self.call_later(
            self.member_session_timeout_ms(group.group_id, member),
            functools.partial(self._expire, group.group_id, member.member_id),
        )

    def schedule_classic_timeout(
        self, kind: str, group_id: str, member_id: str, delay_ms: int, if_absent: bool = False
    ) -> None:
        """Start a classic member's ``"join"`` or ``"sync"`` deadline (``if_absent``: unless one runs);
        it is fenced when the deadline passes."""
        timers = self._join_timers if kind == "join" else self._sync_timers
        key = (group_id, member_id)
        if if_absent and key in timers:
            return
        self.cancel_classic_timeout(kind, group_id, member_id)
        timers[key] = self.call_later(delay_ms, functools.partial(self._classic_timeout, kind, group_id, member_id))

    def cancel_classic_timeout(self, kind: str, group_id: str, member_id: str) -> None:
        timer = (self._join_timers if kind == "join" else self._sync_timers).pop((group_id, member_id), None)
        if timer is not None:
            timer.cancel()

    def _classic_timeout(self, kind: str, group_id: str, member_id: str) -> None:
        (self._join_timers if kind == "join" else self._sync_timers).pop((group_id, member_id), None)
        group = self.groups.get(group_id)
        if group is not None and member_id in group.members:
            self.fence(group, member_id, f"did not {kind} within its rebalance timeout")
            if self.on_change is not None:
                self.on_change(group_id)

    def _schedule_revocation(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        key = (group.group_id, member.member_id)
        if member.state is not MemberState.UNREVOKED_PARTITIONS or member.classic is not None:
            timer = self._rebalance_timers.pop(key, None)
            if timer is not None:
                timer.cancel()
        elif key not in self._rebalance_timers:
            self._rebalance_timers[key] = self.call_later(
                member.rebalance_timeout_ms,
                functools.partial(self._fence, group.group_id, member.member_id, member.member_epoch),
            )

    def _expire(self, group_id: str, member_id: str) -> None:
        self._session_timers.pop((group_id, member_id), None)
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is not None and member is not None:
            timeout = self.member_session_timeout_ms(group_id, member)
            self.fence(group, member_id, f"expired after {timeout} ms without a heartbeat")
            if self.on_change is not None:
                self.on_change(group_id)

    def _fence(self, group_id: str, member_id: str, epoch: int) -> None:
        self._rebalance_timers.pop((group_id, member_id), None)
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        if member.state is MemberState.UNREVOKED_PARTITIONS and member.member_epoch == epoch:
            self.fence(group, member_id, f"did not revoke its partitions within {member.rebalance_timeout_ms} ms")
            if self.on_change is not None:
                self.on_change(group_id)

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        """Stop every timer of a member."""
        for timers in (self._session_timers, self._rebalance_timers, self._join_timers, self._sync_timers):
            timer = timers.pop((group_id, member_id), None)
            if timer is not None:
                timer.cancel()

    def install(self, group: ConsumerGroup) -> None:
        """A group loaded from ``__consumer_offsets``: its members' sessions start now (as Kafka's
        coordinator schedules them on load), and their revocation timers where they revoke."""
        self.groups[group.group_id] = group
        for member in group.members.values():
            self.schedule_session(group, member)
            if member.member_epoch != STATIC_LEAVE_EPOCH:
                self._schedule_revocation(group, member)

    def unload(self, owns: Callable[[str], bool]) -> list[str]:
        """The coordinator lost the groups for which ``owns(group_id)``: forget them and their
        timers; the ids forgotten."""
        gone = [g for g in self.groups if owns(g)]
        for group_id in gone:
            self.forget(group_id)
        return gone

    def forget(self, group_id: str) -> ConsumerGroup | None:
        """Drop a group and its members' timers (unloaded, or converted to a classic group)."""
        group = self.groups.pop(group_id, None)
        for member_id in list(group.members) if group is not None else ():
            self.cancel_timers(group_id, member_id)
        return group

    def delete(self, group_id: str) -> bool:
        """DeleteGroups of a group without members; whether there was one."""
        return self.groups.pop(group_id, None) is not None


def _check_epoch(member: ConsumerGroupMember, req: ConsumerHeartbeat) -> str | None:
    """Why ``req``'s epoch fences ``member`` (Kafka's ``throwIfMemberEpochIsInvalid``); None if it does not."""
    epoch = req.member_epoch
    if epoch > member.member_epoch:
        return f"member {member.member_id} sent epoch {epoch}, ahead of its epoch {member.member_epoch}"
    if epoch < member.member_epoch:
        owned = req.owned
        if epoch != member.previous_member_epoch or owned is None or not _subset(owned, member.assigned):
            return f"member {member.member_id} sent epoch {epoch}, behind its epoch {member.member_epoch}"
    return None


def _subset(owned: Assignment, assigned: Assignment) -> bool:
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())


INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


@functools.lru_cache(maxsize=1024)
def compile_regex(regex: str) -> re.Pattern[str]:
    """A subscription's regular expression; re.error when it is not one. Kafka compiles them with
    RE2/J, whose syntax is a subset of Python's for what subscriptions use (classes, alternation,
    repetition, anchors); Python also accepts lookarounds and backreferences, which RE2 refuses."""
    return re.compile(regex)


def forget_unused_regexes(group: ConsumerGroup) -> None:
    """Drop the resolutions of regexes no member subscribes with any more."""
    in_use = {m.subscribed_topic_regex for m in group.members.values()}
    for regex in [r for r in group.resolved_regexes if r not in in_use]:
        del group.resolved_regexes[regex]
        group.regex_versions.pop(regex, None)


def resolve_regexes(
    group: ConsumerGroup,
    topics: Mapping[str, int],
    authorized: TopicFilter | None = None,
    only: Collection[str] | None = None,
    now_ms: int = 0,
) -> None:
    """Match the members' regular expressions (``only``: just these) against every topic but the
    internal ones, as Kafka's coordinator does (a topic matches when the whole name matches), keeping
    the matches ``authorized`` lets through when given. A regex whose topics changed records the
    group epoch and ``now_ms`` in ``group.regex_versions``; regexes no member uses are forgotten."""
    forget_unused_regexes(group)
    regexes = {m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex is not None}
    if only is not None:
        regexes &= set(only)
    names = [t for t in topics if t not in INTERNAL_TOPICS] if regexes else []
    for regex in sorted(regexes):
        matched = frozenset(t for t in names if compile_regex(regex).fullmatch(t))
        if authorized is not None and matched:
            matched = frozenset(authorized(sorted(matched)))
        if group.resolved_regexes.get(regex) != matched:
            group.resolved_regexes[regex] = matched
            group.regex_versions[regex] = (group.group_epoch, now_ms)
