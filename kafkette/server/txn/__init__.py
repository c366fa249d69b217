"""The transaction coordinator: transactional ids, their transactions and markers.

``state`` holds the state machine (no I/O), ``log_store`` the
``__transaction_state`` records, ``markers`` the control batches that end a
transaction, and ``coordinator`` puts them together as ``broker.transactions``.
"""
