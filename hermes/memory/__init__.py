"""Memory: the three tiers (basic block, fact store, sessions) and the context file.

Every function here takes the user first: there is no way to read another user's rows.
"""
