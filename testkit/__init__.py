"""Plumbing that tests/, bench/ and chaos/ share: free ports, waiting on conditions and
servers, a throwaway PostgreSQL, the controllable SMTP double. Not shipped in the wheel."""
