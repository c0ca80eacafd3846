"""Tier 2: the fact store and its parts (records, search, duplicates, entities, graph, vectors,
per-turn recall)."""
