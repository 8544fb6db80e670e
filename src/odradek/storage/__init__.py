"""odradek.storage."""
