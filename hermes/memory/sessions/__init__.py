"""Tier 3: session transcripts and their parts (records, search with bm25 and re-ranking,
transcript and chat-export importers, past messages for the turn)."""
