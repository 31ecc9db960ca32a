"""People's accounts: the use cases, and the tables and rules they are made of."""
