"""authsvc: signup verification and password resets with versioned tokens and a leased outbox."""

__version__ = "0.1.0"
