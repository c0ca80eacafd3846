"""How far session search trusts a query's words (hermes.memory.words.trust; the messages'
coverage: hermes.memory.sessions.fusion): incidental words leave the ranking to meaning,
specific ones keep it."""

import pytest

np = pytest.importorskip("numpy")

from hermes.memory.sessions import fusion, semantic  # noqa: E402
from hermes.memory.sessions.store import SessionStore  # noqa: E402
from hermes.memory.sessions.vectors import MessageVectors  # noqa: E402
from hermes.memory.words import trust  # noqa: E402
from hermes.memory.words.dates import time_spans  # noqa: E402
from hermes.store.fts import build_match  # noqa: E402
from tests.histories import say  # noqa: E402
from tests.test_embeddings import ToyEmbedder  # noqa: E402

FILLER = ("busy morning at work again", "work was long today, the morning meeting ran over",
          "another morning, another day at work")


@pytest.fixture
def store(db, clock):
    return SessionStore(db, clock=clock, vectors=MessageVectors(db, ToyEmbedder()))


def long_history(store, clock, user="owner"):
    """Past MIN_HISTORY messages of everyday chatter that says "morning" and "work" a lot."""
    for i in range(trust.MIN_HISTORY // 2 + 5):
        say(store, clock, user, FILLER[i % 3], FILLER[(i + 1) % 3])


def test_content_terms_leave_out_stopwords_contractions_and_the_dates_a_query_names():
    plan = build_match("I'm sure we don't want the dentist in March 2025?")
    words = [t.tokens for t in trust.content_terms(plan, time_spans("in March 2025"))]
    assert words == [("sure",), ("want",), ("dentist",)]


def test_coverage_weighs_rare_words_and_reads_the_users_own_messages_only(store, clock, db):
    long_history(store, clock)
    (both,) = say(store, clock, "owner", "the kestrel came back this morning")
    (common,) = say(store, clock, "owner", "lovely morning")
    (bobs,) = say(store, clock, "bob", "a kestrel this morning")
    words = trust.query_words(db, build_match("kestrel morning"))
    assert [t.tokens for t in words.terms] == [("kestrel",), ("morning",)]
    assert words.idf[0] > 3 * words.idf[1]  # "morning" is in most messages
    cover = fusion.coverage(db, "owner", words, [both, common, bobs])
    assert cover[both] == pytest.approx(1.0)
    assert 0 < cover[common] < 0.25
    assert bobs not in cover


def test_a_small_home_trusts_its_words_wholly(store, clock, db):
    say(store, clock, "owner", "the kestrel came back", "lovely morning")
    assert trust.query_words(db, build_match("kestrel morning")) is trust.NO_WORDS


def test_trust_is_a_ramp_between_its_bounds():
    assert trust.trust(0.1, 0.18, 0.24) == 0.0
    assert trust.trust(0.21, 0.18, 0.24) == pytest.approx(0.5)
    assert trust.trust(0.3, 0.18, 0.24) == 1.0
    assert trust.evidence({1: 0.5, 2: 1.0}, {1: 1.0, 2: 0.3}) == pytest.approx(0.5)


def test_incidental_words_leave_the_ranking_to_meaning(store, clock, db, monkeypatch):
    long_history(store, clock)
    # The exchange the new message depends on shares none of its words.
    cue, _ = say(store, clock, "owner", "we adopted a dog from the shelter", "good for you!")
    for _ in range(3):
        say(store, clock, "owner", FILLER[0])
    message = "the puppy trainer came by this morning before work"
    hits = store.search_messages("owner", message, limit=5)
    assert hits[0].message.id == cue
    assert "bm25" not in hits[0].parts and hits[0].parts["dense"] > 0
    # The trust alone does it (no lead for meaning beyond the words) ...
    monkeypatch.setattr(semantic, "DEFAULT_SEMANTIC", semantic.SemanticParams(beyond=0.0))
    assert store.search_messages("owner", message, limit=5)[0].message.id == cue
    # ... and trusting the words wholly, as before, the chatter that says "morning" comes first.
    monkeypatch.setattr(semantic, "DEFAULT_SEMANTIC", semantic.SemanticParams(
        trust_low=-1.0, trust_high=-0.5, beyond=0.0))
    assert store.search_messages("owner", message, limit=5)[0].message.id != cue


def test_specific_words_keep_the_word_ranking(store, clock, db):
    long_history(store, clock)
    (inspection,) = say(store, clock, "owner", "the dog inspection passed this morning")
    say(store, clock, "owner", "we adopted a dog from the shelter", "good for you!")
    hits = store.search_messages("owner", "how did the dog inspection go?", limit=5)
    assert hits[0].message.id == inspection and "bm25" in hits[0].parts


def test_untrusted_words_still_choose_the_turn_within_its_conversation():
    from hermes.memory.sessions.rerank import RankedMessage

    # One conversation: the turn holding the query's words (1) and its neighbour (2), a shade
    # closer in meaning; another conversation's message (3), closest of all. The words cover
    # little of the query: not trusted to choose the conversation.
    ranked = [RankedMessage(1, 10, 1.0, {"bm25": 1.0}), RankedMessage(2, 10, 0.3,
                                                                      {"neighbours": 0.3}),
              RankedMessage(3, 20, 0.0, {}, matched="")]
    sims = semantic.Similarities(np.array([1, 2, 3]), np.array([0.30, 0.32, 0.40], np.float32),
                                 np.array([0.30, 0.32, 0.40], np.float32))
    cover = {1: 0.05, 2: 0.0}

    def scores(**params):
        out = semantic.rerank_by_meaning(ranked, sims, limit=3, cover=cover,
                                         params=semantic.SemanticParams(**params))
        return [r.message_id for r in out], {r.message_id: r.score for r in out}

    order, score = scores()
    assert order[0] == 3  # meaning chooses the conversation
    # the words still choose the turn within it: the neighbour loses its lead over the turn
    # that holds them (a weight of 0.5 reverses the two; none leaves the neighbour ahead)
    _, unordered = scores(within=0.0)
    assert score[2] - score[1] < unordered[2] - unordered[1]
    assert scores(within=0.5)[0] == [3, 1, 2] and scores(within=0.0)[0] == [3, 2, 1]


def test_the_wordless_nearest_keeps_a_place_among_the_best_five():
    from hermes.memory.sessions.rerank import RankedMessage

    # Seven messages hold the query's words (trusted: they cover it and agree with it); the
    # eighth holds none and is the nearest in meaning, a little: the words alone bury it.
    ranked = [RankedMessage(i, 10 + i, 1.0, {"bm25": 1.0}) for i in range(1, 8)]
    ranked.append(RankedMessage(8, 30, 0.0, {}, matched=""))
    cosines = np.array([0.309, 0.308, 0.307, 0.21, 0.21, 0.21, 0.21, 0.31], np.float32)
    sims = semantic.Similarities(np.arange(1, 9), cosines, cosines)
    cover = {i: 1.0 for i in range(1, 8)}

    def order(floor: float = 0.2, **params) -> list[int]:
        out = semantic.rerank_by_meaning(ranked, sims, limit=8, cover=cover, floor=floor,
                                         params=semantic.SemanticParams(**params))
        return [r.message_id for r in out]

    assert order(keep_nearest=0)[-1] == 8  # the words bury it
    kept = semantic.rerank_by_meaning(ranked, sims, limit=8, cover=cover, floor=0.2)
    assert [r.message_id for r in kept].index(8) == 4  # fifth: never below meaning alone's first
    assert kept[4].parts["nearest kept"] > 0 and kept[4].matched == "meaning"
    assert order(keep_nearest=3).index(8) == 2
    # already among the best: left where the fusion put it
    first = semantic.rerank_by_meaning(ranked, sims, limit=8, cover={}, floor=0.2,
                                       params=semantic.SemanticParams(keep_nearest=1))
    assert first[0].message_id == 8 and "nearest kept" not in first[0].parts
    assert order(floor=0.35)[-1] == 8  # under the model's floor: not a match by meaning, not kept
    # a nearest that holds words is the fusion's to place, however low its words put it
    ranked[6] = RankedMessage(7, 17, 0.1, {"bm25": 0.1})
    worded = np.array([0.309, 0.308, 0.307, 0.21, 0.21, 0.21, 0.33, 0.31], np.float32)
    sims = semantic.Similarities(np.arange(1, 9), worded, worded)
    assert order().index(7) > 4 and order(keep_nearest=0, keep_count=1) == order(keep_count=1)
    # ... and the wordless second nearest keeps its place in its stead
    assert order().index(8) == 4 and order(keep_count=1).index(8) > 4


def test_meanings_two_nearest_keep_their_places_among_the_best_five():
    from hermes.memory.sessions.rerank import RankedMessage

    # "Which language am I studying?": one conversation holds the word (trusted: it covers
    # the query and its best turn is the nearest in meaning), and its turns fill the best
    # five; the answer ("I've started Japanese lessons") holds no word and is meaning's
    # second, another wordless exchange its third.
    ranked = [RankedMessage(i, 10, 1.0 - i / 20, {"bm25": 1.0 - i / 20}) for i in range(1, 8)]
    ranked += [RankedMessage(8, 30, 0.0, {}, matched=""), RankedMessage(9, 31, 0.0, {},
                                                                         matched="")]
    cosines = np.array([0.51, 0.30, 0.30, 0.29, 0.29, 0.28, 0.28, 0.39, 0.38], np.float32)
    sims = semantic.Similarities(np.arange(1, 10), cosines, cosines)
    cover = {i: 1.0 for i in range(1, 8)}

    def order(**params) -> list[int]:
        out = semantic.rerank_by_meaning(ranked, sims, limit=9, cover=cover, floor=0.2,
                                         params=semantic.SemanticParams(**params))
        return [r.message_id for r in out]

    assert order(keep_count=1).index(8) > 4  # meaning's first holds the word: nothing kept
    assert order()[:5] == [1, 2, 3, 4, 8]  # meaning's second is kept fifth, its third not
    assert order(keep_count=3)[:5] == [1, 2, 3, 8, 9]  # the nearest first
    assert order(keep_nearest=0).index(8) > 4
    # meaning's first two both hold no word: both kept, the nearest fourth
    cosines[0] = 0.37
    assert order()[:5] == [1, 2, 3, 8, 9] and order(keep_count=1)[:5] == [1, 2, 3, 4, 8]


def test_a_kept_nearest_already_fifth_stays_among_the_best_five():
    # "What's my spouse's job?": meaning's first is the fusion's 5th, its second the 7th;
    # the second's place is the last other turn's, not the first's.
    order = list(range(7))
    total = np.array([7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0])
    message = np.array([0.3, 0.3, 0.3, 0.3, 0.45, 0.3, 0.44], np.float32)
    wordless = np.array([0, 0, 0, 0, 1, 0, 1], np.float64)
    gains = semantic._keep_nearest(order, total, message, wordless, 0.2, 5, 2)
    assert order[:5] == [0, 1, 2, 4, 6] and order[5] == 3
    assert all(total[a] >= total[b] for a, b in zip(order, order[1:], strict=False))
    assert set(gains) == {4, 6} and min(gains.values()) > 0


def test_words_no_message_near_the_query_holds_are_not_trusted():
    from hermes.memory.sessions.rerank import RankedMessage

    # "Where was my childhood spent?": one message says "childhood" (half the query's words)
    # at 0.23 while the nearest turns, which hold none, are at 0.40-0.45; coverage 0.5 x
    # agreement 0.51 is over the ramp's top, so the long turns' length and windows would
    # order the wordless ones, and the short answer ("I grew up on a farm outside Leeds"),
    # meaning's fifth, would rank sixth.
    ranked = [RankedMessage(1, 10, 1.0, {"bm25": 1.0})]
    ranked += [RankedMessage(i, 10 + i, 0.0, {}, matched="") for i in range(2, 8)]
    cosines = np.array([0.23, 0.45, 0.44, 0.43, 0.42, 0.41, 0.40], np.float32)
    windows = np.array([0.23, 0.45, 0.44, 0.43, 0.42, 0.30, 0.40], np.float32)
    sims = semantic.Similarities(np.arange(1, 8), cosines, windows)
    lengths = {1: 300, 2: 400, 3: 400, 4: 400, 5: 400, 6: 40, 7: 400}

    def ranking(**params) -> list:
        return semantic.rerank_by_meaning(ranked, sims, limit=7, cover={1: 0.5}, floor=0.2,
                                          lengths=lengths,
                                          params=semantic.SemanticParams(**params))

    meaning_first = ranking()
    assert [r.message_id for r in meaning_first][:5] == [2, 3, 4, 5, 6]
    assert "bm25" not in meaning_first[-1].parts  # the words weigh nothing
    trusted = ranking(trust_nearest_word=0.0)  # as before: the words trusted wholly
    assert [r.message_id for r in trusted].index(6) > 4 and "bm25" in trusted[-1].parts
    # a word match near enough the query's meaning (0.30 of 0.45) keeps the words' trust
    cosines[0] = windows[0] = 0.30
    assert [r.message_id for r in ranking()].index(6) > 4


def test_a_wordless_turn_under_the_floor_takes_an_incidental_word_matchs_place():
    from hermes.memory.sessions.rerank import RankedMessage

    # A lone exchange in a long history stands at 0.18 to the message that depends on it,
    # under the model's floor (0.2); six turns share an incidental word with it and are
    # farther still. The words are not trusted: the exchange ranks first, and it is listed
    # in place of a word match, as a match by meaning.
    ranked = [RankedMessage(i, 10 + i, 1.0, {"bm25": 1.0}) for i in range(1, 7)]
    ranked.append(RankedMessage(7, 30, 0.0, {}, matched=""))
    cosines = np.array([0.15, 0.14, 0.13, 0.12, 0.12, 0.12, 0.18], np.float32)
    sims = semantic.Similarities(np.arange(1, 8), cosines, cosines)

    def ranking(cover=None, timed=(), **params) -> list:
        return semantic.rerank_by_meaning(
            ranked, sims, limit=7, cover={i: 0.05 for i in range(1, 7)} if cover is None
            else cover, floor=0.2, timed=timed, params=semantic.SemanticParams(**params))

    first = ranking()[0]
    assert first.message_id == 7 and first.matched == "meaning"
    assert ranking(in_place_of_words=0)[0].matched == ""  # the floor alone: a fill-in
    # words trusted wholly (they cover the query): an incidental match is not what it is
    trusted = ranking(cover={i: 1.0 for i in range(1, 7)})
    assert next(r for r in trusted if r.message_id == 7).matched == ""
    # no word match below it to take the place of: a query that matches nothing lists nothing
    alone = semantic.rerank_by_meaning(
        [RankedMessage(7, 30, 0.0, {}, matched=""), RankedMessage(8, 31, 0.0, {}, matched="")],
        semantic.Similarities(np.array([7, 8]), np.array([0.18, 0.12], np.float32),
                              np.array([0.18, 0.12], np.float32)),
        limit=2, cover={}, floor=0.2)
    assert [r.matched for r in alone] == ["", ""]
    # first by another part (it says when, asked when) but under half the floor (where the
    # nearest stop joining), or above word matches all nearer in meaning: not shown
    cosines[5:] = [0.05, 0.09]
    assert ranking(timed={7})[0].message_id == 7 and ranking(timed={7})[0].matched == ""
    cosines[:] = [0.19, 0.19, 0.19, 0.19, 0.19, 0.19, 0.18]
    assert ranking(timed={7})[0].message_id == 7 and ranking(timed={7})[0].matched == ""
    cosines[5] = 0.17  # ... but one is farther
    assert ranking(timed={7})[0].matched == "meaning"


def test_meaning_beyond_words_is_measured_against_the_word_matches_the_trust_read():
    from hermes.memory.sessions.rerank import RankedMessage

    # Eight turns hold the query's words (trusted); the seventh by words is the nearest of all
    # in meaning. A wordless turn nearer than the first five but not than that one gains no
    # lead over the words: the trust vouched for the words of the word ranking's best 20.
    ranked = [RankedMessage(i, 10 + i, 1.0 - i / 10, {"bm25": 1.0 - i / 10})
              for i in range(1, 9)]
    ranked.append(RankedMessage(9, 30, 0.0, {}, matched=""))
    cosines = np.array([0.30, 0.30, 0.30, 0.30, 0.30, 0.20, 0.50, 0.20, 0.45], np.float32)
    sims = semantic.Similarities(np.arange(1, 10), cosines, cosines)

    def parts(**params) -> dict:
        out = semantic.rerank_by_meaning(ranked, sims, limit=9,
                                         cover={i: 1.0 for i in range(1, 9)}, floor=0.2,
                                         params=semantic.SemanticParams(**params))
        return next(r.parts for r in out if r.message_id == 9)

    assert "beyond words" not in parts()
    assert parts(beyond_pool=5)["beyond words"] > 0
    cosines[6] = 0.40  # nearer than every word match: a lead
    assert parts()["beyond words"] > 0
