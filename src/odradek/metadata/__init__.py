"""Cluster metadata: Kafka's ZooKeeper layout and the coordination store behind it.

Modules:

- :mod:`~odradek.metadata.store`: the async ``CoordinationStore`` interface (ZooKeeper's operations,
  persistent watches, multi) and ``ZnodeStat``.
- :mod:`~odradek.metadata.embedded`: ``EmbeddedStore``, the in-process tree (persistent znodes
  in ``<log.dirs[0]>/metadata/znodes.json``, see :mod:`~odradek.metadata.snapshot`).
- :mod:`~odradek.metadata.zookeeper`: ``ZooKeeperStore``, Apache ZooKeeper through kazoo (with its
  watches and TLS connections, :mod:`~odradek.metadata.zookeeper_watch` and
  :mod:`~odradek.metadata.zookeeper_tls`, the only importers of kazoo; import it only when
  ``zookeeper.connect`` is set).
- :mod:`~odradek.metadata.znodes`: the znode layout as typed objects (``path``/``encode``/``decode``),
  with ``BrokerInfo``, ``LeaderAndIsr``, ``PartitionAssignment``, ``ZkData``.
- :mod:`~odradek.metadata.kafka_zk_client`: ``KafkaZkClient``, Kafka's verbs on that layout.
- :mod:`~odradek.metadata.errors`: the store and codec errors.
- :mod:`~odradek.metadata.change_notifications`: ``ZkNodeChangeNotificationListener``, following a
  folder of sequential change notices.
- :mod:`~odradek.metadata.config_entities`: the ``/config`` entities (merging writes, change notices)
  and ``ZkConfigManager``; :mod:`~odradek.metadata.scram_credentials`: SCRAM credentials in
  ``/config/users`` and the brokers' ``CredentialCache``.
- :mod:`~odradek.metadata.acl_store` and :mod:`~odradek.metadata.authorizer`: the ACL znodes and
  the ZooKeeper-mode ``AclAuthorizer``.

Nothing is imported here, so ``import odradek.metadata.znodes`` stays cheap and kazoo-free.
"""
