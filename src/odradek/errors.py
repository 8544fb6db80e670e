"""Kafka's error codes and odradek's exception tree.

``ErrorCode`` is Kafka's error-code table (``org.apache.kafka.common.protocol.Errors``), taken from
kio, so every code a client knows has the same number and name here.

Every exception that can end up in a response derives from :class:`KafkaError` and carries the
``error_code`` it maps to. Request handlers catch ``KafkaError`` per partition and answer with its
code; anything else is a bug, answered with ``UNKNOWN_SERVER_ERROR`` and logged with its traceback.

Tree::

    KafkaError
    +-- CorruptRecordError          CORRUPT_MESSAGE      CRC mismatch, torn or truncated batch
    +-- InvalidRecordError          INVALID_RECORD       well-formed frame, invalid batch header
    +-- RecordValidationError       INVALID_RECORD or INVALID_TIMESTAMP, with per-record errors
    +-- RecordTooLargeError         MESSAGE_TOO_LARGE    batch larger than max.message.bytes
    +-- RecordListTooLargeError     RECORD_LIST_TOO_LARGE
    +-- OffsetOutOfRangeError       OFFSET_OUT_OF_RANGE
    +-- UnknownTopicOrPartitionError UNKNOWN_TOPIC_OR_PARTITION
    +-- TopicExistsError            TOPIC_ALREADY_EXISTS
    +-- InvalidTopicError           INVALID_TOPIC_EXCEPTION
    +-- InvalidPartitionsError      INVALID_PARTITIONS
    +-- InvalidReplicationFactorError INVALID_REPLICATION_FACTOR
    +-- InvalidConfigError          INVALID_CONFIG       (also raised for bad broker configs)
    +-- InvalidRequestError         INVALID_REQUEST
    +-- PolicyViolationError        POLICY_VIOLATION
    +-- UnsupportedVersionError     UNSUPPORTED_VERSION
    +-- NotLeaderOrFollowerError    NOT_LEADER_OR_FOLLOWER
    +-- StaleControllerEpochError   STALE_CONTROLLER_EPOCH
    +-- KafkaStorageError           KAFKA_STORAGE_ERROR  I/O failure on a log directory
    +-- InvalidTimestampError       INVALID_TIMESTAMP
    +-- UnsupportedCompressionTypeError UNSUPPORTED_COMPRESSION_TYPE
    +-- InvalidReplicaAssignmentError INVALID_REPLICA_ASSIGNMENT
    +-- NotEnoughReplicasError      NOT_ENOUGH_REPLICAS
    +-- TopicDeletionDisabledError  TOPIC_DELETION_DISABLED
    +-- FencedLeaderEpochError      FENCED_LEADER_EPOCH  request's leader epoch older than ours
    +-- UnknownLeaderEpochError     UNKNOWN_LEADER_EPOCH request's leader epoch newer than ours
    +-- OutOfOrderSequenceError     OUT_OF_ORDER_SEQUENCE_NUMBER  idempotent producer's gap
    +-- InvalidProducerEpochError   INVALID_PRODUCER_EPOCH        a fenced producer epoch

``IllegalStateTransition`` (not a ``KafkaError``) is raised by every state machine for a move its
transition table does not allow.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = [
    "CorruptRecordError",
    "ErrorCode",
    "IllegalStateTransition",
    "InvalidConfigError",
    "InvalidPartitionsError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "KafkaError",
    "KafkaStorageError",
    "LogDirNotFoundError",
    "NotEnoughReplicasError",
    "NotLeaderOrFollowerError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "PolicyViolationError",
    "RecordListTooLargeError",
    "RecordTooLargeError",
    "RecordValidationError",
    "ReplicaNotAvailableError",
    "StaleControllerEpochError",
    "TopicDeletionDisabledError",
    "TopicExistsError",
    "UnknownProducerIdError",
    "UnknownTopicOrPartitionError",
    "UnsupportedCompressionTypeError",
    "UnsupportedVersionError",
]


class KafkaError(Exception):
    """Base of every error that maps to a Kafka error code."""

    error_code: ErrorCode = ErrorCode.unknown_server_error


class CorruptRecordError(KafkaError):
    error_code = ErrorCode.corrupt_message


class InvalidRecordError(KafkaError):
    error_code = ErrorCode.invalid_record


class RecordTooLargeError(KafkaError):
    error_code = ErrorCode.message_too_large


class RecordValidationError(KafkaError):
    """Records of a batch broke a per-record rule (Kafka's ``RecordValidationException``, KIP-467).

    ``error_code`` is INVALID_TIMESTAMP when any record has an invalid timestamp, else
    INVALID_RECORD; ``record_errors`` lists ``(batch_index, message)`` for every rejected record,
    ``batch_index`` counting records from 0 within the batch. The whole batch is refused.
    """

    def __init__(self, message: str, error_code: ErrorCode, record_errors: list[tuple[int, str | None]]) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.record_errors = record_errors


class RecordListTooLargeError(KafkaError):
    error_code = ErrorCode.record_list_too_large


class OffsetOutOfRangeError(KafkaError):
    error_code = ErrorCode.offset_out_of_range


class UnknownTopicOrPartitionError(KafkaError):
    error_code = ErrorCode.unknown_topic_or_partition


class TopicExistsError(KafkaError):
    error_code = ErrorCode.topic_already_exists


class InvalidTopicError(KafkaError):
    error_code = ErrorCode.invalid_topic_exception


class InvalidPartitionsError(KafkaError):
    error_code = ErrorCode.invalid_partitions


class InvalidReplicationFactorError(KafkaError):
    error_code = ErrorCode.invalid_replication_factor


class InvalidConfigError(KafkaError):
    error_code = ErrorCode.invalid_config


class InvalidRequestError(KafkaError):
    error_code = ErrorCode.invalid_request


class PolicyViolationError(KafkaError):
    error_code = ErrorCode.policy_violation


class UnsupportedVersionError(KafkaError):
    error_code = ErrorCode.unsupported_version


class NotLeaderOrFollowerError(KafkaError):
    error_code = ErrorCode.not_leader_or_follower


class StaleControllerEpochError(KafkaError):
    error_code = ErrorCode.stale_controller_epoch


class KafkaStorageError(KafkaError):
    error_code = ErrorCode.kafka_storage_error


class InvalidTimestampError(KafkaError):
    error_code = ErrorCode.invalid_timestamp


class UnsupportedCompressionTypeError(KafkaError):
    error_code = ErrorCode.unsupported_compression_type


class InvalidReplicaAssignmentError(KafkaError):
    error_code = ErrorCode.invalid_replica_assignment


class NotEnoughReplicasError(KafkaError):
    error_code = ErrorCode.not_enough_replicas


class TopicDeletionDisabledError(KafkaError):
    error_code = ErrorCode.topic_deletion_disabled


class FencedLeaderEpochError(KafkaError):
    """The request's leader epoch is older than the partition's (KIP-320)."""

    error_code = ErrorCode.fenced_leader_epoch


class UnknownLeaderEpochError(KafkaError):
    """The request's leader epoch is newer than the partition's: this broker is behind (KIP-320)."""

    error_code = ErrorCode.unknown_leader_epoch


class IllegalStateTransition(Exception):
    """A state machine was asked for a move its transition table does not allow."""


class OutOfOrderSequenceError(KafkaError):
    """An idempotent producer's batch does not follow its previous sequence number."""

    error_code = ErrorCode.out_of_order_sequence_number


class LogDirNotFoundError(KafkaError):
    """The path named is not one of the broker's ``log.dirs``."""

    error_code = ErrorCode.log_dir_not_found


class ReplicaNotAvailableError(KafkaError):
    """This broker hosts no replica of the partition (yet)."""

    error_code = ErrorCode.replica_not_available


class UnknownProducerIdError(KafkaError):
    """The partition no longer knows the producer (its state was removed by retention or
    ``producer.id.expiration.ms``) and the batch does not start a sequence at 0."""

    error_code = ErrorCode.unknown_producer_id


class InvalidProducerEpochError(KafkaError):
    """An idempotent producer's epoch is older than the one the partition has seen."""

    error_code = ErrorCode.invalid_producer_epoch
