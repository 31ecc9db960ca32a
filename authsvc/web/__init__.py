"""The web layer (Flask): the JSON API, the pages, and what they share. It never sends mail."""
