"""The broker's metrics, named as the Prometheus JMX exporter renders Kafka's MBeans.

- :mod:`.broker_topic`: ``BrokerTopicMetrics`` counted on the produce and fetch paths;
- :mod:`.request_metrics`: ``RequestMetrics`` (requests per API and version, time per stage);
- :mod:`.reservoir`: the bounded sample reservoir behind Kafka's histograms;
- :mod:`.collectors`: gauges read from the broker's state at scrape time (replica manager,
  logs, controller, ZooKeeper session, coordinators, consumer lag, log cleaner, connections);
- :mod:`.loop_probe`: the event loop's idle share and lag;
- :mod:`.families` and :mod:`.exposition`: metric families and the text format;
- :mod:`.http`: the ``metrics.listener`` HTTP server (``/metrics``, ``/health/live``,
  ``/health/ready``).

Between ``controller, coordinator`` and ``server`` in the layers: the collectors read replication,
controller and coordinator objects; :mod:`odradek.server.broker_metrics` wires them to a broker.
"""
