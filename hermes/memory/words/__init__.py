"""What a text's words say, read the same way by facts/ and sessions/ (below both): the dates a
query names (:mod:`.dates`) and whether a text holds a word worth recalling anything for
(:mod:`.substance`)."""
