"""odradek.metadata."""
