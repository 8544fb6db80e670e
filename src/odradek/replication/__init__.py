"""odradek.replication."""
