"""What ``odradek consumer-groups`` shows of a group: the group and its members as described
(classic groups by DescribeGroups, consumer groups of KIP-848 by ConsumerGroupDescribe, with their
epochs and target assignments) and the tables of ``--describe --members`` and ``--state``, in the
columns of Kafka's ``kafka-consumer-groups.sh`` (Kafka 4's extra columns for consumer groups).
Plain output to stdout, notices to stderr."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import NamedTuple

from odradek.cli.common import MISSING, table
from odradek.storage.topic_partition import TopicPartition

__all__ = ["Group", "Listed", "Member", "describe_members", "describe_state", "state_notice"]


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: dict[str, list[int]] = field(default_factory=dict)
    epoch: int | None = None
    """A consumer group's (KIP-848) member epoch; None for a classic group."""
    target: dict[str, list[int]] | None = None
    """A consumer group member's target assignment."""

    @property
    def partitions(self) -> list[TopicPartition]:
        return sorted(TopicPartition(t, p) for t, ps in self.assignment.items() for p in ps)


@dataclass
class Group:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[Member]
    coordinator: str
    group_type: str = "classic"
    group_epoch: int | None = None
    assignment_epoch: int | None = None


class Listed(NamedTuple):
    group_id: str
    protocol_type: str
    state: str
    group_type: str


# --- output -----------------------------------------------------------------------------------------


def state_notice(group: Group) -> bool:
    """Print Kafka's notice for the group's state; False if the group does not exist."""
    if group.state == "Dead":
        print(f"\nError: Consumer group '{group.group_id}' does not exist.", file=sys.stderr)
        return False
    if group.state == "Empty":
        print(f"\nConsumer group '{group.group_id}' has no active members.", file=sys.stderr)
    elif group.state in ("PreparingRebalance", "CompletingRebalance"):
        print(f"\nWarning: Consumer group '{group.group_id}' is rebalancing.", file=sys.stderr)
    return True


def describe_members(group: Group, verbose: bool) -> None:
    def assignment(m: Member) -> str:
        text = ",".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(m.assignment.items()) if ps)
        return text or MISSING

    print()
    header: tuple[str, ...]
    rows: list[tuple[object, ...]]
    widths: tuple[int | None, ...]
    if verbose:
        header = ("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
        rows = [
            (group.group_id, m.member_id, m.instance_id, m.host, m.client_id, len(m.partitions)) for m in group.members
        ]
        if group.group_type == "consumer":  # Kafka 4's columns for consumer groups
            header += ("CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT")
            rows = [
                (
                    *row,
                    m.epoch,
                    assignment(m),
                    group.assignment_epoch,
                    assignment(Member(m.member_id, None, "", "", m.target or {})),
                )
                for row, m in zip(rows, group.members, strict=True)
            ]
            widths = (15, 15, 17, 15, 15, 12, 14, 20, 13, None)
        else:
            header += ("ASSIGNMENT",)
            rows = [(*row, assignment(m)) for row, m in zip(rows, group.members, strict=True)]
            widths = (15, 15, 17, 15, 15, 12, None)
    else:
        header = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
        rows = [(group.group_id, m.member_id, m.host, m.client_id, len(m.partitions)) for m in group.members]
        widths = (15, 15, 15, 15, None)
    for line in table(header, rows, widths):
        print(line)


def describe_state(group: Group) -> None:
    print()
    if group.group_type == "consumer":
        row_c = (
            group.group_id,
            group.coordinator,
            group.protocol or MISSING,
            group.state,
            group.group_epoch,
            group.assignment_epoch,
            len(group.members),
        )
        header_c = (
            "GROUP",
            "COORDINATOR (ID)",
            "ASSIGNMENT-STRATEGY",
            "STATE",
            "GROUP-EPOCH",
            "TARGET-ASSIGNMENT-EPOCH",
            "#MEMBERS",
        )
        for line in table(header_c, [row_c], (15, 25, 20, 20, 12, 24, None)):
            print(line)
        return
    row = (group.group_id, group.coordinator, group.protocol or MISSING, group.state, len(group.members))
    header = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
    for line in table(header, [row], (15, 25, 20, 20, None)):
        print(line)
