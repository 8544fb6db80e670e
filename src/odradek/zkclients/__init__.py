"""Clients coordinated through ZooKeeper, as seed 004 describes them (Kafka 0.8's producer
discovery and ``ZookeeperConsumerConnector``): :mod:`.broker_partition_info`, :mod:`.producer`,
:mod:`.consumer_connector`, :mod:`.assignors`, :mod:`.group_znodes`. Above both ``metadata``
(ZooKeeper) and ``client`` (the wire), below ``cli``. See ``docs/zookeeper-clients.md``."""
