"""Events out to apps (Standard Webhooks): the envelope, signing secrets, allowed targets."""
