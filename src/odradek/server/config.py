"""Broker configuration: Kafka's ``server.properties`` keys, types and defaults.

``BROKER_CONFIGS`` is the table of every key the broker accepts; ``docs/configuration.md`` is
generated from it and ``BROKER_CONFIGS`` with :data:`odradek.storage.config.TOPIC_CONFIGS`
(a unit test keeps them in sync). Keys Kafka has but odradek does not act on are accepted and
documented as such, so an existing ``server.properties`` loads; a key Kafka does not have, or a
value of the wrong type or range, is refused with :class:`~odradek.errors.InvalidConfigError`
(one line naming the key).

Synonyms as Kafka: ``log.retention.ms`` > ``log.retention.minutes`` > ``log.retention.hours``;
``log.roll.ms`` > ``log.roll.hours``; ``log.dirs`` > ``log.dir``.

:class:`KafkaConfig` is immutable after construction; read it from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.configdef import ConfigDef, at_least, between, one_of
from odradek.configdef import parse_properties as parse_properties
from odradek.coordinator.group.group_config import GROUP_BROKER_CONFIGS, check_broker_group_keys
from odradek.errors import InvalidConfigError
from odradek.metadata.authorizer import is_acl_authorizer
from odradek.security.delegation_token import DELEGATION_TOKEN_CONFIGS
from odradek.security.listener_config import LISTENER_PREFIX, listener_config
from odradek.security.sasl.mechanism_keys import GSSAPI_CONFIGS, OAUTHBEARER_CONFIGS, OAUTHBEARER_MECHANISM_KEYS
from odradek.security.tls import SSL_CONFIG
from odradek.security.zookeeper_auth import ZkSaslCredentials, zookeeper_sasl_credentials
from odradek.security.zookeeper_tls import ZK_TLS_CONFIGS, ZkTlsConfig, zk_tls_config
from odradek.server.policies import POLICY_CONFIGS
from odradek.server.request_limits import LIMIT_CONFIGS
from odradek.storage.config import BROKER_SYNONYMS, TOPIC_CONFIGS, LogConfig, gzip_level, metadata_version

HOUR_MS = 3600 * 1000

BROKER_CONFIGS = (
    ConfigDef()
    # --- identity and listeners
    .define("broker.id", "int", 0, "This broker's id, unique in the cluster.", at_least(0))
    .define(
        "listeners",
        "list",
        ["PLAINTEXT://127.0.0.1:9092"],
        "Where the broker listens: NAME://host:port, comma-separated. Port 0 picks a free port. A host "
        "name is listened on at every address it resolves to (`localhost`: 127.0.0.1 and ::1 where the "
        "resolver lists both), on one port; an empty host on every local address.",
    )
    .define(
        "advertised.listeners",
        "list",
        None,
        "What clients are told to connect to; defaults to `listeners`. The host is advertised exactly as "
        "written (`localhost` stays `localhost`), except that a wildcard host (empty, 0.0.0.0, ::) is "
        "advertised as 127.0.0.1.",
    )
    .define(
        "listener.security.protocol.map",
        "string",
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "Listener name to security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL): `NAME:PROTOCOL`, "
        "comma-separated. A listener whose name is not in the map must be named after its protocol.",
    )
    .define(
        "inter.broker.listener.name",
        "string",
        None,
        "Listener the controller and other brokers use to reach this broker; defaults to the listener "
        "named by security.inter.broker.protocol when that is set, else the first listener.",
    )
    .define(
        "security.inter.broker.protocol",
        "string",
        "PLAINTEXT",
        "Security protocol between brokers (the listener of that name). Set this or "
        "inter.broker.listener.name, not both.",
    )
    .define(
        "odradek.broker.source.address",
        "string",
        None,
        "odradek's own key (Kafka has none): the local address the broker's outgoing connections bind "
        "(replica fetchers, the controller's channels, transaction markers, controlled shutdown), e.g. "
        "127.0.0.3 to give each broker of one machine its own loopback address. Unset: the OS chooses.",
    )
    .define(
        "control.plane.listener.name",
        "string",
        None,
        "A listener reserved for the controller's requests (LeaderAndIsr, StopReplica, UpdateMetadata): "
        "the controller connects to other brokers on it, and it must not be the inter-broker listener. "
        "Unset: the controller uses the inter-broker listener.",
    )
    # --- authentication (SASL)
    .define(
        "sasl.enabled.mechanisms",
        "list",
        ["GSSAPI"],
        "SASL mechanisms served on SASL listeners (per listener: "
        "`listener.name.<listener>.sasl.enabled.mechanisms`): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
        "OAUTHBEARER (KIP-255/KIP-768) and GSSAPI (Kerberos, Kafka's default: a Krb5LoginModule JAAS entry with "
        "the broker's keytab; docs/security.md).",
    )
    .define(
        "sasl.mechanism.inter.broker.protocol",
        "string",
        "GSSAPI",
        "SASL mechanism brokers use between them when the inter-broker listener is SASL_PLAINTEXT or "
        "SASL_SSL; must be one of that listener's enabled mechanisms.",
    )
    .define(
        "sasl.jaas.config",
        "password",
        None,
        "JAAS login configuration used when no `listener.name.<listener>.<mechanism>.sasl.jaas.config` is "
        'set (Kafka reads its static JAAS file there): PlainLoginModule\'s `user_<name>="<password>"` options '
        "list the PLAIN users, `username`/`password` the broker's own identity. Parsed, never evaluated.",
    )
    .define(
        "sasl.server.max.receive.size",
        "int",
        524288,
        "Largest frame a client may send before it is authenticated (SASL tokens, ApiVersions); a "
        "larger one closes the connection.",
        at_least(1),
    )
    .define(
        "connection.failed.authentication.delay.ms",
        "int",
        100,
        "How long a failed authentication's answer is held back before the connection is closed.",
        at_least(0),
    )
    .define(
        "connections.max.reauth.ms",
        "long",
        0,
        "KIP-368: a SASL session's lifetime, told to the client in SaslAuthenticate v1+; a request "
        "after it ends without re-authenticating closes the connection. 0: sessions do not expire.",
        at_least(0),
    )
    .define(
        "ssl.principal.mapping.rules",
        "string",
        "DEFAULT",
        "Rules mapping a client certificate's subject to the principal's name (Kafka's syntax: "
        "`RULE:pattern/replacement/[LU]`, `DEFAULT`).",
    )
    .define(
        "controller.socket.timeout.ms",
        "int",
        30000,
        "How long the controller waits for a broker to answer one of its requests before reconnecting "
        "and sending it again.",
        at_least(1),
    )
    .define("broker.rack", "string", None, "Rack of this broker, reported in metadata.")
    # --- metadata store
    .define(
        "zookeeper.connect",
        "string",
        None,
        "host:port[,host:port]/chroot of the ZooKeeper ensemble. Unset: an embedded store in the first "
        "log dir, with the same znode layout.",
    )
    .define("zookeeper.session.timeout.ms", "int", 18000, "ZooKeeper session timeout.", at_least(1))
    .define(
        "zookeeper.connection.timeout.ms",
        "int",
        None,
        "How long to wait for a ZooKeeper connection at start; defaults to the session timeout.",
    )
    .define(
        "zookeeper.set.acl",
        "boolean",
        False,
        "Create znodes with ACLs: the creator (the broker's SASL identity and TLS certificate) may do "
        "everything, the world only read, and not even read /config/users, /config/brokers and "
        "/delegation_token/tokens. Needs a SASL login to ZooKeeper (a JAAS Client section) or a TLS client "
        "certificate (zookeeper.ssl.keystore.location).",
    )
    .define(
        "zookeeper.jaas.config.file",
        "string",
        None,
        "A JAAS file whose Client section (DigestLoginModule username/password) logs the broker in to "
        "ZooKeeper with SASL DIGEST-MD5; unset: -Djava.security.auth.login.config in KAFKA_OPTS, as Kafka.",
    )
    .include(ZK_TLS_CONFIGS)  # zookeeper.ssl.*, zookeeper.clientCnxnSocket: TLS to ZooKeeper (KIP-515)
    # --- log directories and storage defaults
    .define("log.dirs", "list", None, "Directories holding partition logs (the first also holds metadata).")
    .define("log.dir", "string", "/tmp/odradek-logs", "Used when log.dirs is not set.")
    .define("log.segment.bytes", "int", 1024 * 1024 * 1024, "Default segment.bytes.", at_least(14))
    .define("log.roll.ms", "long", None, "Default segment.ms (overrides log.roll.hours).", at_least(1))
    .define("log.roll.hours", "int", 168, "Default segment.ms in hours.", at_least(1))
    .define("log.retention.ms", "long", None, "Default retention.ms (overrides minutes and hours).", at_least(-1))
    .define("log.retention.minutes", "int", None, "Default retention.ms in minutes.", at_least(-1))
    .define("log.retention.hours", "int", 168, "Default retention.ms in hours.", at_least(-1))
    .define("log.retention.bytes", "long", -1, "Default retention.bytes.", at_least(-1))
    .define("log.retention.check.interval.ms", "long", 300000, "How often retention runs.", at_least(1))
    .define("log.index.interval.bytes", "int", 4096, "Default index.interval.bytes.", at_least(0))
    .define("log.index.size.max.bytes", "int", 10 * 1024 * 1024, "Default segment.index.bytes.", at_least(8))
    .define("log.flush.interval.messages", "long", 2**63 - 1, "Default flush.messages.", at_least(1))
    .define("log.flush.interval.ms", "long", None, "Default flush.ms (unset: leave it to the OS).", at_least(0))
    .define(
        "log.flush.scheduler.interval.ms",
        "long",
        2**63 - 1,
        "How often the flusher checks logs.",
        at_least(1),
    )
    .define(
        "log.flush.offset.checkpoint.interval.ms",
        "int",
        60000,
        "How often recovery points are checkpointed.",
        at_least(1),
    )
    .define(
        "log.message.timestamp.type",
        "string",
        "CreateTime",
        "Default message.timestamp.type.",
        one_of("CreateTime", "LogAppendTime"),
    )
    .define(
        "log.message.timestamp.difference.max.ms",
        "long",
        2**63 - 1,
        "Deprecated default of message.timestamp.difference.max.ms.",
        at_least(0),
    )
    .define(
        "log.message.timestamp.before.max.ms",
        "long",
        2**63 - 1,
        "Default message.timestamp.before.max.ms.",
        at_least(0),
    )
    .define(
        "log.message.timestamp.after.max.ms", "long", 2**63 - 1, "Default message.timestamp.after.max.ms.", at_least(0)
    )
    .define(
        "log.message.format.version",
        "string",
        "3.0-IV1",
        "Deprecated default of message.format.version; accepted and ignored, as by Kafka 3.x.",
        metadata_version,
    )
    .define("log.message.downconversion.enable", "boolean", True, "Default message.downconversion.enable.")
    .define("log.local.retention.ms", "long", -2, "Default local.retention.ms (tiered storage).", at_least(-2))
    .define("log.local.retention.bytes", "long", -2, "Default local.retention.bytes (tiered storage).", at_least(-2))
    .define("log.cleanup.policy", "list", ["delete"], "Default cleanup.policy.", one_of("delete", "compact"))
    .define(
        "log.cleaner.enable",
        "boolean",
        True,
        "Run the log cleaner: logs with cleanup.policy=compact keep the last record of every key "
        "(cleaned in worker processes).",
    )
    .define(
        "log.cleaner.delete.retention.ms",
        "long",
        86400000,
        "Default delete.retention.ms: how long tombstones and emptied transaction markers stay after their "
        "batch was first cleaned.",
        at_least(0),
    )
    .define(
        "log.cleaner.min.compaction.lag.ms",
        "long",
        0,
        "Default min.compaction.lag.ms: a record stays uncompacted at least this long.",
        at_least(0),
    )
    .define(
        "log.cleaner.max.compaction.lag.ms",
        "long",
        2**63 - 1,
        "Default max.compaction.lag.ms: a dirty segment older than this is cleaned whatever the dirty ratio.",
        at_least(1),
    )
    .define(
        "log.cleaner.min.cleanable.ratio",
        "double",
        0.5,
        "Default min.cleanable.dirty.ratio: clean a log when its dirty bytes exceed this share of it.",
        between(0, 1),
    )
    .define("log.cleaner.threads", "int", 1, "Cleaner threads (worker processes) cleaning logs at once.", at_least(0))
    .define(
        "log.cleaner.dedupe.buffer.size",
        "long",
        134217728,
        "Memory for the cleaners' key maps, shared by the threads (each map: its share times the load factor, "
        "96 bytes plus the key's length per key).",
        at_least(0),
    )
    .define(
        "log.cleaner.io.buffer.size",
        "int",
        524288,
        "Accepted as Kafka's; the cleaner reads segments through memory maps.",
        at_least(0),
    )
    .define(
        "log.cleaner.io.buffer.load.factor",
        "double",
        0.9,
        "Share of each cleaner's dedupe buffer its key map may fill.",
        between(0, 1),
    )
    .define(
        "log.cleaner.io.max.bytes.per.second",
        "double",
        1.7976931348623157e308,
        "Read and write rate of all cleaners together (bytes per second), divided among the threads.",
        at_least(0),
    )
    .define(
        "log.cleaner.backoff.ms",
        "long",
        15000,
        "Pause of a cleaner that found no log to clean.",
        at_least(0),
    )
    .define("log.preallocate", "boolean", False, "Accepted for compatibility.")
    .define("log.roll.jitter.ms", "long", None, "Accepted for compatibility.")
    .define("log.roll.jitter.hours", "int", 0, "Accepted for compatibility.")
    .define("log.segment.delete.delay.ms", "long", 60000, "Accepted for compatibility; deletion is immediate.")
    .define("num.recovery.threads.per.data.dir", "int", 1, "Accepted for compatibility; recovery is serial.")
    .define("message.max.bytes", "int", 1048588, "Default max.message.bytes: largest batch accepted.", at_least(0))
    .define(
        "compression.type",
        "string",
        "producer",
        "Default compression.type.",
        one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    )
    .define("compression.gzip.level", "int", -1, "Default compression.gzip.level.", gzip_level)
    .define("compression.lz4.level", "int", 9, "Default compression.lz4.level.", between(1, 17))
    .define("compression.zstd.level", "int", 3, "Default compression.zstd.level.", between(-131072, 22))
    # --- topics
    .define("num.partitions", "int", 1, "Partitions of an auto-created topic.", at_least(1))
    .define("default.replication.factor", "int", 1, "Replication factor of an auto-created topic.", at_least(1))
    .define(
        "auto.create.topics.enable",
        "boolean",
        True,
        "Create a topic on first Metadata request or produce naming it.",
    )
    .define("delete.topic.enable", "boolean", True, "Allow DeleteTopics.")
    .define("min.insync.replicas", "int", 1, "Default min.insync.replicas.", at_least(1))
    .define("unclean.leader.election.enable", "boolean", False, "Default unclean.leader.election.enable.")
    # --- network
    .define(
        "socket.request.max.bytes",
        "int",
        104857600,
        "Largest request frame accepted; larger frames close the connection before being buffered.",
        at_least(1),
    )
    .define(
        "socket.send.buffer.bytes",
        "int",
        -1,
        "SO_SNDBUF of client sockets; -1 for the OS default (autotuned). Kafka's default is 102400; "
        "on loopback that split each 1 MB fetch answer into five sendfile calls with a wait for the socket "
        "between them (RF=3 produce about 8 % slower, raw fetch 2.9 instead of 3.5 GB/s).",
    )
    .define(
        "socket.receive.buffer.bytes",
        "int",
        -1,
        "SO_RCVBUF of client sockets; -1 for the OS default (autotuned). Kafka's default is 102400; "
        "on loopback that cut raw produce from about 950 to 550-735 MB/s.",
    )
    .define("num.network.threads", "int", 3, "Accepted for compatibility; one event loop serves all sockets.")
    .define(
        "num.io.threads",
        "int",
        8,
        "I/O threads that write produced payloads of 256 KiB or more to the page cache.",
        at_least(1),
    )
    .define(
        "queued.max.requests",
        "int",
        500,
        "Requests buffered per connection before the broker stops reading from it.",
        at_least(1),
    )
    .define(
        "odradek.produce.pipelined.requests",
        "int",
        5,
        "odradek's own key (Kafka has none): acks=all Produce requests one connection may have appended "
        "and waiting for the in-sync replicas while the broker reads its next request. 1 handles one "
        "request per connection at a time, as Kafka does; more lets replication stream instead of "
        "waiting a round trip per request (5 is what an idempotent producer keeps in flight). Answers "
        "and appends keep the requests' order either way, and any other request waits until every "
        "earlier answer is sent.",
        between(1, 64),
    )
    .define(
        "connections.max.idle.ms",
        "long",
        600000,
        "Close client connections with no request in flight and no bytes received for this long "
        "(checked every tenth of it, at most every 30 s).",
        at_least(1),
    )
    .define(
        "metrics.listener",
        "string",
        None,
        "http://HOST:PORT of the broker's metrics listener: /metrics in Prometheus text format (names as "
        "the Prometheus JMX exporter renders Kafka's MBeans), /health/live and /health/ready. Port 0 picks "
        "a free port. Unset: no listener, and no request or topic counting.",
    )
    .define(
        "schema.registry.listener",
        "string",
        None,
        "http://HOST:PORT (or https://) on which the broker serves Confluent's Schema Registry REST API, "
        "on a thread and event loop of its own, storing schemas in the compacted _schemas topic through "
        "this broker's inter-broker listener and electing one writing instance through ZooKeeper "
        "(zookeeper.connect). Port 0 picks a free port. Unset: no registry.",
    )
    .define(
        "schema.registry.ssl.certificate.location",
        "string",
        None,
        "PEM certificate (chain) file of an https schema.registry.listener.",
    )
    .define(
        "schema.registry.ssl.key.location",
        "string",
        None,
        "PEM private key file of an https schema.registry.listener (unset: the key is in the certificate file).",
    )
    .define(
        "schema.registry.authentication.method",
        "string",
        None,
        "NONE or BASIC: HTTP Basic credentials checked by a SCRAM login against the cluster. "
        "Unset: BASIC when the inter-broker listener uses SASL, else NONE.",
    )
    .define(
        "schema.registry.writers",
        "list",
        "",
        "Principals (User:name or name) allowed to change the registry when authentication is BASIC; "
        "the others may only read (403).",
    )
    .define(
        "schema.registry.max.request.bytes",
        "int",
        10485760,
        "Largest request body the schema registry reads; a larger one is refused (413) before it is parsed.",
        at_least(1024),
    )
    .define(
        "max.connections",
        "int",
        2147483647,
        "Connections the broker keeps open across its listeners; a connection accepted past it is "
        "closed at once with a log line.",
        at_least(0),
    )
    .define(
        "max.connection.creation.rate",
        "int",
        2147483647,
        "New connections accepted per second on each listener (listener.name.<l>. prefix for one "
        "listener); past it the listener's new connections wait, unserved, until the rate allows "
        "(Kafka delays accepting them).",
        at_least(0),
    )
    .define(
        "max.connections.per.ip",
        "int",
        2147483647,
        "Connections from one IP address; past it a new connection from that address is closed at once "
        "(Kafka's TooManyConnectionsException).",
        at_least(0),
    )
    .define(
        "max.connections.per.ip.overrides",
        "string",
        "",
        "Per-IP or per-host limits that replace max.connections.per.ip: `host:count,ip:count`.",
    )
    .define(
        "queued.max.request.bytes",
        "long",
        -1,
        "Accepted for compatibility; request memory already grows only with the bytes received.",
    )
    # --- replication
    .define(
        "replica.lag.time.max.ms",
        "long",
        30000,
        "A follower that has not caught up with the leader's log end for this long leaves the ISR; the "
        "leader checks every half of it.",
        at_least(1),
    )
    .define("num.replica.fetchers", "int", 1, "Fetcher tasks (connections) per source broker.", at_least(1))
    .define("replica.fetch.max.bytes", "int", 1048576, "Per-partition bytes a follower fetch asks for.", at_least(0))
    .define(
        "replica.fetch.response.max.bytes",
        "int",
        10485760,
        "Bytes a follower fetch asks for in all (at least one batch is returned).",
        at_least(0),
    )
    .define("replica.fetch.wait.max.ms", "int", 500, "Follower fetch long-poll wait.", at_least(0))
    .define("replica.fetch.min.bytes", "int", 1, "Bytes a follower fetch waits for.", at_least(1))
    .define("replica.fetch.backoff.ms", "int", 1000, "Pause of a follower fetcher after a fetch error.", at_least(0))
    .define("replica.socket.timeout.ms", "int", 30000, "Request timeout of follower fetches (beyond the wait).")
    .define(
        "max.incremental.fetch.session.cache.slots",
        "int",
        1000,
        "Incremental fetch sessions (KIP-227) the broker keeps, split over 8 shards (an eighth each) as Kafka 3.9's.",
        at_least(0),
    )
    .define(
        "min.incremental.fetch.session.eviction.ms",
        "long",
        120000,
        "Kafka's fixed MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS as a key: a fetch session unused this long "
        "may be evicted for any new one; a session created less than this ago is evicted only if it is a "
        "consumer's and the new one a follower's.",
        at_least(0),
    )
    .define(
        "leader.replication.throttled.rate",
        "long",
        2**63 - 1,
        "Bytes/s this broker sends to out-of-sync followers of partitions in leader.replication.throttled.replicas. "
        "Dynamic: per broker or cluster-wide through AlterConfigs on a broker resource.",
        at_least(0),
    )
    .define(
        "follower.replication.throttled.rate",
        "long",
        2**63 - 1,
        "Bytes/s this broker fetches, while out of sync, for partitions in follower.replication.throttled.replicas. "
        "Dynamic, as the leader rate.",
        at_least(0),
    )
    .define("replication.quota.window.num", "int", 11, "Sample windows of the replication throttles.", at_least(1))
    .define("replication.quota.window.size.seconds", "int", 1, "Length of a replication throttle sample.", at_least(1))
    .define(
        "quota.window.num",
        "int",
        11,
        "Sample windows of the client quotas' rates (producer_byte_rate, consumer_byte_rate, request_percentage); "
        "the byte rates' token buckets save up (num - 1) windows of quota, `controller_mutation_rate`'s num windows.",
        at_least(1),
    )
    .define("quota.window.size.seconds", "int", 1, "Length of a client quota sample.", at_least(1))
    # --- dynamic password configs (Kafka's PasswordEncoderConfigs)
    .define(
        "password.encoder.secret",
        "password",
        None,
        "Secret that encrypts password configs set at run time (stored in /config/brokers/<id>); without it "
        "such passwords are refused.",
    )
    .define(
        "password.encoder.old.secret",
        "password",
        None,
        "The previous password.encoder.secret: stored passwords that the current secret cannot decode are "
        "decoded with this one.",
    )
    .define(
        "password.encoder.keyfactory.algorithm",
        "string",
        None,
        "Key factory of the password encoder: PBKDF2WithHmacSHA512 (unset), PBKDF2WithHmacSHA256 or "
        "PBKDF2WithHmacSHA1.",
    )
    .define(
        "password.encoder.cipher.algorithm",
        "string",
        "AES/CBC/PKCS5Padding",
        "Cipher of the password encoder; only AES/CBC/PKCS5Padding.",
        one_of("AES/CBC/PKCS5Padding"),
    )
    .define("password.encoder.key.length", "int", 128, "Key length (bits) of the password encoder.", at_least(8))
    .define("password.encoder.iterations", "int", 4096, "PBKDF2 iterations of the password encoder.", at_least(1024))
    .define(
        "controlled.shutdown.enable",
        "boolean",
        True,
        "On SIGTERM, ask the controller to move this broker's leaderships to other in-sync replicas (and "
        "take it out of the ISRs it is in) before stopping. Only with zookeeper.connect.",
    )
    .define(
        "controlled.shutdown.max.retries",
        "int",
        3,
        "ControlledShutdown attempts while partitions remain (no other in-sync replica) or the controller "
        "does not answer; the broker then stops anyway.",
        at_least(1),
    )
    .define(
        "controlled.shutdown.retry.backoff.ms", "long", 5000, "Pause between ControlledShutdown attempts.", at_least(0)
    )
    .define(
        "auto.leader.rebalance.enable",
        "boolean",
        True,
        "The controller moves leadership back to preferred replicas when a broker's share of partitions led "
        "elsewhere exceeds leader.imbalance.per.broker.percentage (checked every "
        "leader.imbalance.check.interval.seconds).",
    )
    .define(
        "leader.imbalance.check.interval.seconds", "long", 300, "How often the leader balance is checked.", at_least(1)
    )
    .define(
        "leader.imbalance.per.broker.percentage",
        "int",
        10,
        "Share (%) of a broker's preferred partitions led elsewhere that triggers a preferred election.",
        at_least(0),
    )
    # --- groups and transactions (defaults as Kafka)
    .define("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets.", at_least(1))
    .define(
        "offsets.topic.replication.factor",
        "int",
        3,
        "Replication factor of __consumer_offsets (capped at the number of live brokers).",
        at_least(1),
    )
    .define("offsets.topic.segment.bytes", "int", 104857600, "segment.bytes of __consumer_offsets.", at_least(14))
    .define(
        "offsets.retention.minutes",
        "int",
        10080,
        "Keep committed offsets of empty groups this long.",
        at_least(1),
    )
    .define("offsets.retention.check.interval.ms", "long", 600000, "How often offset expiry runs.", at_least(1))
    .define("offsets.commit.timeout.ms", "int", 5000, "How long a commit waits for its write.", at_least(1))
    .define("offset.metadata.max.bytes", "int", 4096, "Largest commit metadata string.", at_least(0))
    .include(GROUP_BROKER_CONFIGS)  # group.*: the group coordinators' keys
    .define("transaction.state.log.num.partitions", "int", 50, "Partitions of __transaction_state.", at_least(1))
    .define("transaction.state.log.replication.factor", "int", 3, "Replication of __transaction_state.")
    .define("transaction.state.log.min.isr", "int", 2, "min.insync.replicas of __transaction_state.")
    .define("transaction.state.log.segment.bytes", "int", 104857600, "segment.bytes of __transaction_state.")
    .define("transaction.max.timeout.ms", "int", 900000, "Largest transaction timeout.", at_least(1))
    .define(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "int",
        10000,
        "How often the transaction coordinator aborts transactions older than their timeout.",
        at_least(1),
    )
    .define(
        "transactional.id.expiration.ms",
        "int",
        604800000,
        "A transactional id with no transaction open and no request for this long is removed.",
        at_least(1),
    )
    .define(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "int",
        3600000,
        "How often the transaction coordinator removes expired transactional ids.",
        at_least(1),
    )
    # --- the share coordinator (KIP-932; defaults as Kafka 4.2's ShareCoordinatorConfig)
    .define("share.coordinator.state.topic.num.partitions", "int", 50, "Partitions of __share_group_state.")
    .define("share.coordinator.state.topic.replication.factor", "int", 3, "Replication of __share_group_state.")
    .define("share.coordinator.state.topic.min.isr", "int", 2, "min.insync.replicas of __share_group_state.")
    .define("share.coordinator.state.topic.segment.bytes", "int", 104857600, "segment.bytes of __share_group_state.")
    .define("share.coordinator.snapshot.update.records.per.snapshot", "int", 500, "ShareUpdates between snapshots.")
    .define("share.coordinator.write.timeout.ms", "int", 5000, "How long a state write waits to be durable.")
    .define("share.coordinator.load.buffer.size", "int", 5242880, "Bytes read at a time loading a partition.")
    .define("share.coordinator.cold.partition.snapshot.interval.ms", "int", 300000, "Snapshot idle state this often.")
    .define(
        "producer.id.expiration.ms",
        "int",
        86400000,
        "A producer id whose last batch on a partition is this old (and has no open transaction) is forgotten there.",
        at_least(1),
    )
    .define(
        "producer.id.expiration.check.interval.ms",
        "int",
        600000,
        "How often partitions forget expired producer ids and producers whose batches retention removed.",
        at_least(1),
    )
    # --- authorization
    .define(
        "authorizer.class.name",
        "string",
        "",
        "Authorizer of every request: `kafka.security.authorizer.AclAuthorizer` (ACLs in ZooKeeper under "
        "/kafka-acl, see docs/security.md; Kafka's pre-3.0 `kafka.security.auth.SimpleAclAuthorizer` is "
        "an alias). Empty: no authorization, and the controller's requests are served only on the "
        "inter-broker listener. Any other class is refused at start-up.",
    )
    .define(
        "super.users",
        "string",
        "",
        "Principals the authorizer allows everything, separated by `;` (`User:admin;User:broker`).",
    )
    .define(
        "allow.everyone.if.no.acl.found",
        "boolean",
        False,
        "With the authorizer: a resource with no ACL at all is allowed to everyone when true.",
    )
    # --- housekeeping
    .define("background.threads", "int", 10, "Accepted for compatibility.")
    .define("request.timeout.ms", "int", 30000, "Timeout of requests the broker sends.", between(1, 2**31 - 1))
)

for _key in (
    *SSL_CONFIG.keys.values(),
    *LIMIT_CONFIGS.keys.values(),
    *POLICY_CONFIGS.keys.values(),
    *OAUTHBEARER_CONFIGS.keys.values(),
    *DELEGATION_TOKEN_CONFIGS.keys.values(),
    *GSSAPI_CONFIGS.keys.values(),
):
    BROKER_CONFIGS.define(_key.name, _key.type, _key.default, _key.doc, _key.validator)
for _java_key in ("ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.provider"):
    BROKER_CONFIGS.define(_java_key, "string", None, "Accepted and ignored (a Java setting).")
BROKER_CONFIGS.define("ssl.secure.random.implementation", "string", None, "Accepted and ignored (a Java setting).")

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
LISTENER_KEY_PREFIXES = (
    "ssl.",
    "sasl.",
    "connections.max.reauth.ms",
    "connection.failed.authentication",
    "max.connection.creation.rate",
)
"""Keys that may be given per listener as ``listener.name.<listener>.<key>``."""
SASL_MECHANISM_KEYS = ("sasl.jaas.config", *OAUTHBEARER_MECHANISM_KEYS)
"""Keys given per listener and mechanism: ``listener.name.<listener>.<mechanism>.<key>``."""


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


def parse_listener(text: str) -> Endpoint:
    """``NAME://host:port`` -> Endpoint; raises InvalidConfigError with the offending text."""
    name, sep, rest = text.partition("://")
    host, colon, port_text = rest.rpartition(":")
    if not sep or not colon or not name:
        raise InvalidConfigError(f"Invalid listener {text!r}: expected NAME://host:port")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        raise InvalidConfigError(f"Invalid listener {text!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise InvalidConfigError(f"Invalid listener {text!r}: port {port} is out of range")
    return Endpoint(name.upper(), host, port)


class KafkaConfig:
    """Typed broker configuration. ``KafkaConfig(props)`` validates everything at once."""

    def __init__(self, props: Mapping[str, Any] | None = None) -> None:
        self.originals: dict[str, Any] = dict(props or {})
        self.listener_overrides = _check_listener_keys(self.originals)
        """``listener.name.<l>.<key>`` entries (validated), as given."""
        plain = {k: v for k, v in self.originals.items() if k not in self.listener_overrides}
        self.values = BROKER_CONFIGS.parse(plain)
        self.listeners = [parse_listener(x) for x in self.values["listeners"]]
        if not self.listeners:
            raise InvalidConfigError("Invalid value for configuration listeners: at least one listener is needed")
        names = [e.listener for e in self.listeners]
        if len(set(names)) != len(names):
            raise InvalidConfigError(f"Invalid value for configuration listeners: duplicate listener name in {names}")
        advertised = self.values["advertised.listeners"]
        self.advertised_listeners = [parse_listener(x) for x in advertised] if advertised else None
        if self.advertised_listeners is not None:
            unknown = {e.listener for e in self.advertised_listeners} - set(names)
            if unknown:
                raise InvalidConfigError(
                    f"Invalid value for configuration advertised.listeners: {sorted(unknown)} not in listeners"
                )

        for endpoint in self.listeners:
            self.listener_security_protocol(endpoint.listener)
        self.inter_broker_listener_name = self._inter_broker_listener()
        self.control_plane_listener_name = self._control_plane_listener()
        check_broker_group_keys(self.values)
        try:
            is_acl_authorizer(self.values["authorizer.class.name"])
        except ValueError as exc:
            raise InvalidConfigError(f"Invalid value for configuration authorizer.class.name: {exc}") from None

    def listener_security_protocol(self, listener: str) -> str:
        """The security protocol of ``listener``; InvalidConfigError (Kafka's message) when the
        map names none and the listener is not itself named after a protocol."""
        protocol = self.security_protocol_map().get(listener)
        if protocol is None:
            if listener in SECURITY_PROTOCOLS:
                return listener
            raise InvalidConfigError(f"No security protocol defined for listener {listener}")
        if protocol not in SECURITY_PROTOCOLS:
            raise InvalidConfigError(
                f"Invalid value {protocol} for configuration listener.security.protocol.map: "
                f"unknown security protocol (one of {', '.join(SECURITY_PROTOCOLS)})"
            )
        return protocol

    def for_listener(self, listener: str) -> dict[str, Any]:
        """The keys as given, with ``listener.name.<listener>.`` keys stripped and overriding
        (Kafka's ``valuesWithPrefixOverride``); what ``create_ssl_context`` and the SASL set-up read."""
        return listener_config(self.originals, listener)

    def listener_value(self, listener: str, key: str) -> Any:
        """One broker key's typed value for ``listener`` (its prefixed value when given)."""
        raw = self.originals.get(f"{LISTENER_PREFIX}{listener.lower()}.{key}")
        return self.values[key] if raw is None else BROKER_CONFIGS.validate_one(key, raw)

    def sasl_enabled_mechanisms(self, listener: str) -> list[str]:
        return [str(m).strip().upper() for m in self.listener_value(listener, "sasl.enabled.mechanisms") or []]

    def _control_plane_listener(self) -> str | None:
        name = self.values["control.plane.listener.name"]
        if not name:
            return None
        name = str(name).upper()
        if name not in [e.listener for e in self.listeners]:
            raise InvalidConfigError(f"control.plane.listener.name {name} must be a listener name defined in listeners")
        if name == self.inter_broker_listener_name:
            raise InvalidConfigError(
                "Invalid value for configuration control.plane.listener.name: it must be different "
                f"from inter.broker.listener.name ({name})"
            )
        return name

    def security_protocol_map(self) -> dict[str, str]:
        """``listener.security.protocol.map`` as listener name -> protocol (both upper case)."""
        result: dict[str, str] = {}
        for item in str(self.values["listener.security.protocol.map"] or "").split(","):
            name, sep, protocol = item.strip().partition(":")
            if not sep or not name or not protocol:
                if item.strip():
                    raise InvalidConfigError(
                        f"Invalid value {item.strip()!r} for configuration listener.security.protocol.map: "
                        "expected NAME:PROTOCOL"
                    )
                continue
            result[name.strip().upper()] = protocol.strip().upper()
        return result

    def _inter_broker_listener(self) -> str:
        """The listener brokers use between them, checked as Kafka's ``KafkaConfig`` does.

        ``inter.broker.listener.name`` and an explicit ``security.inter.broker.protocol`` exclude
        each other; the protocol names a listener of that name; the listener must be one of
        ``advertised.listeners`` (or ``listeners``); a SASL listener's enabled mechanisms must
        include ``sasl.mechanism.inter.broker.protocol``. Raises InvalidConfigError with Kafka's wording.
        """
        names = [e.listener for e in (self.advertised_listeners or self.listeners)]
        explicit_name = self.values["inter.broker.listener.name"]
        explicit_protocol = "security.inter.broker.protocol" in self.originals
        protocol = str(self.values["security.inter.broker.protocol"]).upper()
        if explicit_name and explicit_protocol:
            raise InvalidConfigError(
                "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."
            )
        if explicit_name:
            name = str(explicit_name).upper()
        elif explicit_protocol:
            name = protocol
        else:
            name = self.listeners[0].listener
        if name not in names:
            raise InvalidConfigError(
                "inter.broker.listener.name must be a listener name defined in advertised.listeners. "
                f"The valid options based on currently configured listeners are {','.join(names)}"
            )
        listener_protocol = self.listener_security_protocol(name)
        if listener_protocol in SASL_PROTOCOLS:
            mechanism = str(self.values["sasl.mechanism.inter.broker.protocol"]).upper()
            if mechanism not in self.sasl_enabled_mechanisms(name):
                raise InvalidConfigError(
                    f"sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when "
                    f"SASL is used for inter-broker communication (listener {name}: "
                    f"{','.join(self.sasl_enabled_mechanisms(name))})"
                )
        return name

    @property
    def inter_broker_security_protocol(self) -> str:
        return self.listener_security_protocol(self.inter_broker_listener_name)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def _typed(self, name: str, types: tuple[type, ...]) -> Any:
        """The value of a defined key, checked against its definition's type (KeyError for a key
        the broker does not define, TypeError for a value of another type: a programming error)."""
        if name not in BROKER_CONFIGS.keys:
            raise KeyError(f"{name} is not a broker config key")
        value = self.values[name]
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            raise TypeError(f"{name} is {type(value).__name__}, not {'/'.join(t.__name__ for t in types)}")
        return value

    def get_int(self, name: str) -> int:
        """An ``int``/``long``/``short`` key's value."""
        value: int = self._typed(name, (int,))
        return value

    def get_bool(self, name: str) -> bool:
        """A ``boolean`` key's value."""
        value: bool = self._typed(name, (bool,))
        return value

    def get_float(self, name: str) -> float:
        """A ``double`` key's value (an int default counts)."""
        return float(self._typed(name, (float, int)))

    def get_str(self, name: str) -> str | None:
        """A ``string``/``password``/``class`` key's value (None where it is unset)."""
        value = self.values[name] if name in BROKER_CONFIGS.keys else self._typed(name, (str,))
        return None if value is None else str(value)

    def get_list(self, name: str) -> list[str]:
        """A ``list`` key's value (empty where it is unset)."""
        value = self._typed(name, (list, tuple, type(None))) if self.values.get(name) is not None else []
        return [str(v) for v in value or []]

    @property
    def broker_id(self) -> int:
        return int(self.values["broker.id"])

    @property
    def log_dirs(self) -> list[str]:
        return list(self.values["log.dirs"] or [self.values["log.dir"]])

    @property
    def zookeeper_connect(self) -> str | None:
        value = self.values["zookeeper.connect"]
        return str(value) if value else None

    @property
    def zookeeper_sasl(self) -> ZkSaslCredentials | None:
        """The broker's SASL login to ZooKeeper (``zookeeper.jaas.config.file``, else ``KAFKA_OPTS``'s
        JAAS file). Raises InvalidConfigError for a bad file, or ``zookeeper.set.acl=true`` with
        neither a login nor a TLS client certificate (Kafka refuses to start then too)."""
        credentials = zookeeper_sasl_credentials(self.values["zookeeper.jaas.config.file"])
        if (
            credentials is None
            and self.values["zookeeper.set.acl"]
            and self.zookeeper_connect
            and not self.zookeeper_tls.client_auth_enabled
        ):
            raise InvalidConfigError(
                "zookeeper.set.acl is true, but the broker has no SASL login to ZooKeeper (no JAAS file: "
                "zookeeper.jaas.config.file or -Djava.security.auth.login.config in KAFKA_OPTS, with a Client "
                "section) and no TLS client certificate (zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket "
                "and zookeeper.ssl.keystore.location)"
            )
        return credentials

    @property
    def zookeeper_tls(self) -> ZkTlsConfig:
        """The ``zookeeper.ssl.*`` keys in effect (unset ones from ``KAFKA_OPTS``' ZooKeeper system
        properties, as Kafka); ``.ssl_context()`` builds the context or raises InvalidConfigError."""
        return zk_tls_config(self.originals)

    @property
    def log_roll_ms(self) -> int:
        value = self.values["log.roll.ms"]
        return int(value) if value is not None else int(self.values["log.roll.hours"]) * HOUR_MS

    @property
    def log_retention_ms(self) -> int:
        if self.values["log.retention.ms"] is not None:
            return int(self.values["log.retention.ms"])
        if self.values["log.retention.minutes"] is not None:
            minutes = int(self.values["log.retention.minutes"])
            return -1 if minutes < 0 else minutes * 60000
        hours = int(self.values["log.retention.hours"])
        return -1 if hours < 0 else hours * HOUR_MS

    def log_config_defaults(self) -> dict[str, Any]:
        """Broker-level defaults of every topic config, keyed by the topic-level name."""
        defaults: dict[str, Any] = {}
        for topic_key, broker_key in BROKER_SYNONYMS.items():
            if broker_key in self.values and self.values[broker_key] is not None:
                defaults[topic_key] = self.values[broker_key]
        defaults["segment.ms"] = self.log_roll_ms
        defaults["retention.ms"] = self.log_retention_ms
        if self.values["log.flush.interval.ms"] is None:
            defaults["flush.ms"] = TOPIC_CONFIGS.keys["flush.ms"].default
        return defaults

    def default_log_config(self) -> LogConfig:
        return LogConfig.from_props(None, self.log_config_defaults())


def _check_listener_keys(props: Mapping[str, Any]) -> dict[str, Any]:
    """The ``listener.name.<listener>.<key>`` entries of ``props``, each checked: ``<key>`` is a
    per-listener broker key (``ssl.*``, ``sasl.*``, ``connections.max.reauth.ms``,
    ``max.connection.creation.rate``) whose value
    parses, or ``<mechanism>.sasl.jaas.config``. Raises InvalidConfigError naming the key."""
    found: dict[str, Any] = {}
    for name, value in props.items():
        if not name.startswith(LISTENER_PREFIX):
            continue
        listener, _, key = name[len(LISTENER_PREFIX) :].partition(".")
        if not listener or not key:
            raise InvalidConfigError(f"Unknown configuration {name!r}")
        _, _, mechanism_key = key.partition(".")
        if mechanism_key in SASL_MECHANISM_KEYS and not key.startswith("sasl."):
            BROKER_CONFIGS.validate_one(mechanism_key, value)
        elif key.startswith(LISTENER_KEY_PREFIXES) and key in BROKER_CONFIGS:
            BROKER_CONFIGS.validate_one(key, value)
        else:
            raise InvalidConfigError(f"Unknown configuration {name!r}: {key!r} cannot be set per listener")
        found[name] = value
    return found
