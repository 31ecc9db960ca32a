"""Logs, metrics and probes: what operators read of a running authsvc."""
