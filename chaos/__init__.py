"""The chaos harness: real processes, injected faults, a reconciled report.

Run it with `python -m chaos --requests 5000 --workers 4 --kills 20`
(`make chaos`); see docs/RELIABILITY.md for what it proves and how.
"""
