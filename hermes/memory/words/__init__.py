"""What a text's words say, read the same way by facts/ and sessions/ (below both): the dates a
query names (:mod:`.dates`), whether a text holds a word worth recalling anything for
(:mod:`.substance`), and how far a search may trust the words a query shares with what is
stored (:mod:`.trust`)."""
