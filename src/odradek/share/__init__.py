"""Share groups (KIP-932): queues on Kafka's log.

- :mod:`.state`: the types every part shares: delivery states, acknowledgement types, the state
  batches the share coordinator keeps, and the :class:`~.state.Persister` interface through which
  a partition's leader reads and writes a share-partition's durable state.
- :mod:`.persister`: the persisters: ``DefaultStatePersister`` (the broker's
  ``share_persister``: the local share coordinator, or the coordinator's broker over the
  inter-broker APIs 83-87) and ``InMemoryPersister`` (for tests).
- :mod:`.share_partition`: one share-partition on its leader (acquisition, locks, acknowledgements,
  the start offset and the in-flight window).
"""
