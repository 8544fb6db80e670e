"""odradek.coordinator.group."""
