"""Storage: the SQLite connection, the schema's migrations and the safe FTS5 query builder."""
