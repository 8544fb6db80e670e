"""odradek.protocol."""
