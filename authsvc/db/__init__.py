"""Connections, the embedded server and migrations: how authsvc reaches PostgreSQL."""
