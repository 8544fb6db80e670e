"""odradek.server.apis."""
