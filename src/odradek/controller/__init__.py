"""odradek.controller."""
