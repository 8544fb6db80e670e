"""Errors of the coordination store and of the znode codecs.

The store errors mirror ZooKeeper's ``KeeperException`` codes that Kafka's ``KafkaZkClient``
handles, so code written against :class:`~odradek.metadata.store.CoordinationStore` behaves the same
over the embedded store and over a real ZooKeeper ensemble::

    CoordinationError                 base; ``path`` is the znode involved (or None)
    +-- NoNodeError                   NONODE: the node (or, for create, its parent) is missing
    +-- NodeExistsError               NODEEXISTS
    |   +-- BrokerIdAlreadyRegisteredError   /brokers/ids/<id> held by another live session
    +-- BadVersionError               BADVERSION: a conditional set/delete/check lost the race
    +-- NotEmptyError                 NOTEMPTY: delete of a node with children, not recursive
    +-- NoChildrenForEphemeralsError  NOCHILDRENFOREPHEMERALS
    +-- NoAuthError                   NOAUTH: the znode's ACLs refuse the session (zookeeper.set.acl)
    +-- StoreUnavailableError         ZooKeeper unreachable, session lost or closed
    +-- CorruptStoreError             the embedded store's snapshot file cannot be read
    +-- ZNodeDecodeError              a znode's bytes do not have the documented format

:class:`ControllerMovedError` is Kafka's ``ControllerMovedException``: the caller is no longer the
controller (``/controller_epoch`` moved under it). It is a :class:`~odradek.errors.KafkaError` with
code ``NOT_CONTROLLER`` so request handlers can answer it directly.
"""

from __future__ import annotations

from odradek.errors import ErrorCode, KafkaError

__all__ = [
    "BadVersionError",
    "BrokerIdAlreadyRegisteredError",
    "ControllerMovedError",
    "CoordinationError",
    "CorruptStoreError",
    "NoAuthError",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "StoreUnavailableError",
    "ZNodeDecodeError",
]


class CoordinationError(Exception):
    """Base of every coordination store error; ``path`` names the znode involved, if any."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class NoNodeError(CoordinationError):
    """The znode does not exist (for ``create``: its parent does not exist)."""

    @classmethod
    def at(cls, path: str) -> NoNodeError:
        return cls(f"No node exists at {path}", path)


class NodeExistsError(CoordinationError):
    @classmethod
    def at(cls, path: str) -> NodeExistsError:
        return cls(f"A node already exists at {path}", path)


class BrokerIdAlreadyRegisteredError(NodeExistsError):
    """Another live session holds ``/brokers/ids/<id>``: two brokers were given the same broker.id."""


class BadVersionError(CoordinationError):
    @classmethod
    def at(cls, path: str, expected: int) -> BadVersionError:
        return cls(f"Version conflict at {path}: expected version {expected}", path)


class NotEmptyError(CoordinationError):
    @classmethod
    def at(cls, path: str) -> NotEmptyError:
        return cls(f"Node {path} has children; delete them first or use recursive=True", path)


class NoAuthError(CoordinationError):
    """ZooKeeper's NOAUTH: the znode's ACLs do not let this session do that (only over ZooKeeper)."""

    @classmethod
    def at(cls, path: str) -> NoAuthError:
        return cls(f"Not authorized by the ACLs of {path}", path)


class NoChildrenForEphemeralsError(CoordinationError):
    @classmethod
    def at(cls, path: str) -> NoChildrenForEphemeralsError:
        return cls(f"Cannot create a child of ephemeral node {path}", path)


class StoreUnavailableError(CoordinationError):
    """The store cannot serve requests: ZooKeeper unreachable, session expired, or session closed."""


class CorruptStoreError(CoordinationError):
    """The embedded store's snapshot file is unreadable; the message names the file and the backup."""


class ZNodeDecodeError(CoordinationError, ValueError):
    """A znode's bytes are not in the format its ``*ZNode`` class documents."""

    def __init__(self, path: str, data: bytes, reason: str) -> None:
        shown = data[:200].decode("utf-8", "replace")
        super().__init__(f"Cannot decode znode {path}: {reason} (data: {shown!r})", path)
        self.data = data
        self.reason = reason


class ControllerMovedError(KafkaError):
    """The controller epoch moved: another broker became controller (Kafka's ControllerMovedException)."""

    error_code = ErrorCode.not_controller
