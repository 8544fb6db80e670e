"""Kafka's request log: every completed request's stage times, at DEBUG on the logger
``kafka.request.logger`` (beside the controller's ``state.change.logger``), and into the request
metrics.

One line per request, in Kafka's shape::

    Completed request:Produce(v9, correlationId 12, clientAddress 127.0.0.1:50412) from connection
    conn-7;totalTime:1.204,requestQueueTime:0.011,localTime:0.902,remoteTime:0.000,throttleTime:0,
    responseQueueTime:0.004,sendTime:0.287,securityProtocol:PLAINTEXT,principal:User:ANONYMOUS,
    listener:PLAINTEXT

Times are milliseconds; the stages are those of :mod:`odradek.metrics.request_metrics`. A frame
that never reached an API handler (refused before its header was read) is not reported.

The socket server calls :meth:`RequestLog.completed` when it has one (the broker sets it when the
metrics listener is configured, or when ``kafka.request.logger`` is enabled for DEBUG at start-up).
Runs on the broker's event loop.
"""

from __future__ import annotations

import logging

from odradek.metrics.request_metrics import API_NAMES, RequestMetrics
from odradek.server.request_channel import ConnectionInfo, RequestTimes

__all__ = ["REQUEST_LOGGER", "RequestLog"]

REQUEST_LOGGER = logging.getLogger("kafka.request.logger")


class RequestLog:
    """A :class:`~odradek.server.request_channel.RequestObserver`: request metrics and request log."""

    def __init__(self, metrics: RequestMetrics | None) -> None:
        self.metrics = metrics

    def completed(
        self,
        times: RequestTimes,
        connection: ConnectionInfo,
        arrived: float,
        dequeued: float,
        handled: float,
        send_started: float,
        sent: float,
    ) -> None:
        if times.api_key < 0:
            return
        delayed = times.delayed_at
        local_end = delayed if dequeued <= delayed <= handled else handled
        stages = (
            (dequeued - arrived) * 1000,
            (local_end - dequeued) * 1000,
            (handled - local_end) * 1000,
            (send_started - handled) * 1000,
            (sent - send_started) * 1000,
            (sent - arrived) * 1000,
        )
        if self.metrics is not None:
            self.metrics.record(times.api_key, times.api_version, times.from_follower, stages)
        if REQUEST_LOGGER.isEnabledFor(logging.DEBUG):
            session = connection.session
            REQUEST_LOGGER.debug(
                "Completed request:%s(v%d, correlationId %d, clientAddress %s) from connection %s;"
                "totalTime:%.3f,requestQueueTime:%.3f,localTime:%.3f,remoteTime:%.3f,throttleTime:0,"
                "responseQueueTime:%.3f,sendTime:%.3f,securityProtocol:%s,principal:%s,listener:%s",
                API_NAMES.get(times.api_key, str(times.api_key)),
                times.api_version,
                times.correlation_id,
                connection.peer,
                connection.connection_id,
                stages[5],
                *stages[:5],
                session.security_protocol if session is not None else "-",
                session.principal if session is not None else "-",
                session.listener_name if session is not None else "-",
            )
