"""Embedding apps: their keys, the accounts that belong to them, their idempotent calls."""
