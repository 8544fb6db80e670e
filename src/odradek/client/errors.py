"""Exceptions of the client: network failures, timeouts, and error codes in responses.

Every exception is a :class:`~odradek.errors.KafkaError` carrying the ``error_code`` it stands
for, so callers can branch on Kafka's codes whether the failure came from the socket or from the
broker:

- :class:`KafkaConnectionError` (NETWORK_EXCEPTION): cannot connect, connection closed or reset;
- :class:`KafkaAuthenticationError` (SASL_AUTHENTICATION_FAILED, a KafkaConnectionError): the
  broker refused the SASL exchange, or the mechanism it asked for;
- :class:`KafkaTimeoutError` (REQUEST_TIMED_OUT): no response within the request timeout;
- :class:`KafkaProtocolError` (UNKNOWN_SERVER_ERROR): a response that does not decode;
- :func:`error_for` turns a response's error code (and message) into the matching exception of
  :mod:`odradek.errors` (``TopicExistsError`` for TOPIC_ALREADY_EXISTS, ...) or a
  :class:`ResponseError` for codes without a class of their own. ``str(exc)`` is one line:
  ``TOPIC_ALREADY_EXISTS: Topic 't' already exists.``

Pure data and functions: safe from any thread.
"""

from __future__ import annotations

import functools

from odradek import errors
from odradek.errors import ErrorCode, KafkaError

__all__ = [
    "KafkaAuthenticationError",
    "KafkaConnectionError",
    "KafkaProtocolError",
    "KafkaTimeoutError",
    "ResponseError",
    "error_for",
    "error_name",
    "raise_for",
]


class KafkaConnectionError(KafkaError):
    error_code = ErrorCode.network_exception


class KafkaAuthenticationError(KafkaConnectionError):
    """The broker refused this client's SASL exchange (or the client refused the broker's answer).

    Kafka's ``SaslAuthenticationException``: the message is the broker's ``error_message``. A
    :class:`KafkaConnectionError`, so loops that reconnect after a lost connection (replica
    fetchers, the controller channel) also retry after a refused login; the connection is closed.
    """

    error_code = ErrorCode.sasl_authentication_failed


class KafkaTimeoutError(KafkaError):
    error_code = ErrorCode.request_timed_out


class KafkaProtocolError(KafkaError):
    error_code = ErrorCode.unknown_server_error


class ResponseError(KafkaError):
    """A response's error code with no more specific exception class."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def error_name(code: int) -> str:
    """Kafka's name of an error code (``UNKNOWN_TOPIC_OR_PARTITION``), or ``ERROR_<n>``."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"ERROR_{code}"


@functools.cache
def _classes() -> dict[int, type[KafkaError]]:
    table: dict[int, type[KafkaError]] = {}
    for name in errors.__all__:
        cls = getattr(errors, name)
        if isinstance(cls, type) and issubclass(cls, KafkaError) and cls is not KafkaError:
            table.setdefault(int(cls.error_code), cls)
    return table


def error_for(code: int, message: str | None = None, context: str | None = None) -> KafkaError:
    """The exception for a non-zero error code; ``context`` (e.g. the topic) prefixes the message."""
    text = error_name(code)
    if context:
        text += f" ({context})"
    if message:
        text += f": {message}"
    cls = _classes().get(int(code))
    if cls is not None:
        return cls(text)
    try:
        error_code = ErrorCode(code)
    except ValueError:
        error_code = ErrorCode.unknown_server_error
    return ResponseError(error_code, text)


def raise_for(code: int, message: str | None = None, context: str | None = None) -> None:
    """Raise :func:`error_for` unless ``code`` is 0."""
    if code:
        raise error_for(code, message, context)
