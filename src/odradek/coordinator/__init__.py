"""The coordinators: consumer groups (:mod:`.group`) and transactions (:mod:`.transaction`), each
over an internal topic, sharing :mod:`.runtime` (ownership and loading by leader epoch,
FindCoordinator, writes, tasks) and taking typed dependencies the broker's start-up builds."""
