"""A built-in Schema Registry: Confluent's REST API (v1) over the compacted ``_schemas`` topic.

Modules: :mod:`.records` (the topic's JSON keys and values), :mod:`.state` (in-memory state fed by
them), :mod:`.kafka_store` (reading and writing the topic with odradek's client), :mod:`.leader`
(ZooKeeper leader election), :mod:`.registry` (operations), :mod:`.schemas` with :mod:`.avro`,
:mod:`.json_schema` and :mod:`.protobuf` (parsing and compatibility rules), :mod:`.web` and
:mod:`.api` (HTTP), :mod:`.auth` (Basic against SCRAM), :mod:`.server` (uvicorn on its own thread).
See docs/schema-registry.md.
"""
