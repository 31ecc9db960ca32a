"""Test tools that ship in the repository but not in the wheel (tests, bench and chaos use them)."""
