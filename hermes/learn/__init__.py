"""Learning from conversations: gate -> extract (one model call) -> parse -> consolidate.

Runs after the reply (``worker``), except the fast lane, which writes explicit "remember that ..."
requests before the reply so the next message can already use them.
"""
