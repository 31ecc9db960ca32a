"""The outbox worker: claims email jobs under a lease, renders and sends them."""
