"""odradek.server."""
