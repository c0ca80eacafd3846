"""Session search finds conversation lines only (rev5 T2): the model's tool results are stored
as messages (role 'tool': JSON echoing the facts and conversations it searched) and were ranked
like conversation lines. After a few turns in which the model used its memory tools, `hermes
sessions search tomato` listed 4 sessions whose match was a tool row ('{"facts":[{"id":1,
"content":"The user said: \\"I grow Maskotka **tomatoes**...') above the tomato conversation."""

import json

from tests.histories import say


def _tool_row(store, user, session_id, text):
    store.append(user, session_id, "tool", json.dumps({"facts": [{"id": 1, "content": text}]}),
                 tool_name="facts", tool_args="{}", tool_call_id="c1")


def test_a_tool_result_echoing_memory_is_not_a_search_hit(rt, clock):
    store = rt.memory.sessions
    say(store, clock, "owner", "I grow tomatoes on the balcony")
    chat = store.create("owner", "terminal")
    store.append("owner", chat.id, "user", "what do I grow?")
    _tool_row(store, "owner", chat.id, "The user grows tomatoes on the sunny terrace")
    hits = store.search("owner", "tomatoes", limit=5)
    assert [h.match.role for h in hits if h.match] == ["user"]
    for any_word in (False, True):
        found = store.search_messages("owner", "tomatoes balcony", limit=10, any_word=any_word)
        assert [h.message.role for h in found] == ["user"]
    # the words only a tool row holds are not "said before" (the per-turn gate's count)
    assert store.term_count("owner", '"terrace"', cap=1000) == (0, 1)
    assert store.term_count("owner", '"tomatoes"', cap=1000) == (1, 2)


def test_a_tool_row_in_cjk_is_not_a_search_hit(rt, clock):
    store = rt.memory.sessions
    say(store, clock, "owner", "我们去了京都旅行")
    chat = store.create("owner", "terminal")
    store.append("owner", chat.id, "tool", '{"facts": [{"content": "用户去了京都"}]}',
                 tool_name="facts", tool_args="{}", tool_call_id="c1")
    assert [h.message.role for h in store.search_messages("owner", "京都", limit=10)] == ["user"]


def test_another_users_rows_are_not_reached(rt, clock):
    store = rt.memory.sessions
    say(store, clock, "bob", "my tomatoes split in the rain")
    bob = store.create("bob", "terminal")
    _tool_row(store, "bob", bob.id, "Bob grows tomatoes")
    say(store, clock, "owner", "the tomatoes are ripe")
    assert [(h.session.user, h.message.role) for h in store.search_messages(
        "owner", "tomatoes", limit=10)] == [("owner", "user")]
    assert [h.session.user for h in store.search("owner", "tomatoes", limit=5)] == ["owner"]
    assert store.search_messages("carol", "tomatoes", limit=10) == []
