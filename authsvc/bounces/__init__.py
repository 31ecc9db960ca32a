"""Bounces in from mail providers, and the addresses they suppress."""
