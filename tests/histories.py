"""A user's messages written for a test, one session per call (numpy-free, so that words-only
tests can share it with the tests of search by meaning)."""


def say(store, clock, user, *lines, speaker="someone"):
    """Append each line as a user message of one new discord session, a minute apart; the ids."""
    session = store.create(user, "discord")
    ids = []
    for line in lines:
        clock.advance(minutes=1)
        ids.append(store.append(user, session.id, "user", line, speaker=speaker).id)
    return ids
