"""The transaction coordinator: ``__transaction_state``, the transaction state machine, markers."""

from odradek.coordinator.transaction.coordinator import TransactionCoordinator

__all__ = ["TransactionCoordinator"]
