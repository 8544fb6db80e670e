"""Who may connect and what they may do: TLS, SASL and ACLs, sans-IO.

Everything here is pure data and state machines, fed bytes and config maps, as Kafka's
``org.apache.kafka.common.security`` and ``kafka.security.authorizer`` are:

- :mod:`.tls` builds an ``ssl.SSLContext`` from Kafka's ``ssl.*`` keys (PEM and PKCS12 stores);
  :mod:`.tls_ciphers` maps Kafka's cipher-suite names to OpenSSL's.
- :mod:`.listener_config` resolves ``listener.name.<l>.`` prefixed keys over unprefixed ones.
- :mod:`.principal` is ``KafkaPrincipal``, the certificate subject as Java renders it, and
  ``ssl.principal.mapping.rules``.
- :mod:`.sasl` holds the JAAS parser and the PLAIN and SCRAM-SHA-256/512 mechanisms.
- :mod:`.acl` is Kafka's ACL model and the ``AclAuthorizer`` decision; :mod:`.acl_znodes` their
  ZooKeeper layout and JSON.

Nothing here opens a socket or touches ZooKeeper; the server wires these pieces in.
"""
