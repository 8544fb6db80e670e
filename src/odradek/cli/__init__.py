"""odradek.cli."""
