import pytest

FACT_KEYS = {"id", "content", "entities", "category", "trust", "tags", "score"}


def add(cli, text, *args):
    result = cli("facts", "add", text, *args, "--json")
    assert result.exit_code == 0, result.stderr
    return result.json()


def test_add_prints_id_and_status(cli):
    created = add(cli, "Alice deployed redis for Project Atlas", "--entity", "Alice",
                  "-e", "redis", "--category", "project", "--tag", "ops", "-t", "infra")
    assert created == {"id": 1, "status": "created"}
    assert add(cli, "alice deployed redis for project atlas.") == {"id": 1, "status": "merged"}
    shown = cli("facts", "show", "1", "--json").json()
    assert shown["entities"] == ["Alice", "redis"] and shown["category"] == "project"
    assert shown["tags"] == ["ops", "infra"] and shown["trust"] == 0.5
    text = cli("facts", "add", "Bob maintains kafka", "-e", "Bob")
    assert text.exit_code == 0 and text.stdout.strip() == "Created fact 2 about Bob."


def test_search_probe_reason_print_fact_objects(cli):
    add(cli, "Alice deployed redis for Project Atlas", "-e", "Alice", "-e", "Project Atlas")
    add(cli, "Bob reviewed the Atlas rollout with Alice", "-e", "Bob", "-e", "Alice",
        "-e", "Project Atlas")
    add(cli, "Carol prefers tea", "-e", "Carol")
    for args in (("search", "redis"), ("probe", "alice"), ("reason", "Alice", "Project Atlas")):
        result = cli("facts", *args, "--json")
        assert result.exit_code == 0, result.stderr
        found = result.json()
        assert found and all(set(f) >= FACT_KEYS for f in found)
        assert all(isinstance(f["score"], float) for f in found)
    assert {f["id"] for f in cli("facts", "probe", "Alice", "--json").json()} == {1, 2}
    reasoned = cli("facts", "reason", "Alice", "Bob", "Project Atlas", "--json").json()
    assert [f["id"] for f in reasoned] == [2, 1]
    for blank in ("", "   "):          # an unset shell variable: one line, not "no facts"
        refused = cli("facts", "probe", blank)
        assert (refused.exit_code, refused.stdout) == (1, "")
        assert refused.stderr == ("Error: Nothing to probe: give an entity name "
                                  "(`hermes facts probe NAS`).\n")


def test_search_explain_shows_score_parts(cli):
    add(cli, "Dana collects stamps from Chile", "-e", "Dana")
    explained = cli("facts", "search", "stamps", "--explain", "--json").json()[0]["explain"]
    assert {"bm25", "trust", "score", "mode", "match"} <= set(explained)
    text = cli("facts", "search", "stamps", "--explain").stdout
    assert "bm25=" in text and "trust=0.5" in text and "[1] Dana collects stamps" in text


def test_reason_prints_the_shortest_connection(cli):
    add(cli, "Zed mentors Yuri", "-e", "Zed", "-e", "Yuri")
    add(cli, "Yuri pairs with Xena", "-e", "Yuri", "-e", "Xena")
    text = cli("facts", "reason", "Zed", "Xena").stdout
    assert "Zed -> Yuri -> Xena" in text
    found = cli("facts", "reason", "Zed", "Xena", "--json").json()
    assert [f["id"] for f in found] == [1, 2] and found[0]["path"] == ["Zed", "Yuri", "Xena"]


def test_rate_prints_old_and_new_trust_and_hides_after_three(cli):
    add(cli, "Eve runs payroll on Fridays", "-e", "Eve")
    first = cli("facts", "rate", "1", "unhelpful", "--json").json()
    assert first == {"id": 1, "old_trust": 0.5, "new_trust": 0.4}
    cli("facts", "rate", "1", "unhelpful")
    assert len(cli("facts", "search", "payroll", "--json").json()) == 1
    cli("facts", "rate", "1", "unhelpful")
    assert cli("facts", "search", "payroll", "--json").json() == []
    assert len(cli("facts", "probe", "Eve", "--json").json()) == 1
    assert cli("facts", "rate", "1", "helpful").stdout.strip() == "Fact 1: trust 0.20 -> 0.25."
    assert cli("facts", "rate", "1", "meh").exit_code == 2


def test_update_forget_restore_purge_history_list(cli):
    add(cli, "Frank lives in Porto", "-e", "Frank")
    updated = cli("facts", "update", "1", "Frank lives in Lisbon", "--note", "moved", "--json")
    assert updated.json() == {"id": 2, "status": "updated", "supersedes": 1}
    assert [f["id"] for f in cli("facts", "list", "--json").json()] == [2]
    assert {f["id"] for f in cli("facts", "list", "--all", "--json").json()} == {1, 2}
    assert cli("facts", "show", "1", "--json").json()["status"] == "superseded"
    assert cli("facts", "forget", "2", "--reason", "wrong", "--json").json() == {
        "id": 2, "status": "forgotten"}
    assert cli("facts", "search", "Frank", "--json").json() == []
    assert cli("facts", "restore", "2", "--json").json() == {"id": 2, "status": "active"}
    history = cli("facts", "history", "2", "--json").json()
    assert [h["action"] for h in history] == ["update", "forget", "restore"]
    assert history[0]["old"]["content"] == "Frank lives in Porto"
    assert "forget" in cli("facts", "history", "2").stdout
    third = cli("facts", "update", "2", "Frank lives in Lisbon with Gus", "-e", "Gus", "--json")
    assert third.json()["id"] == 3
    assert cli("facts", "show", "3", "--json").json()["entities"] == ["Frank", "Lisbon", "Gus"]
    refused = cli("facts", "purge", "2", input="n\n")
    assert refused.exit_code == 1
    assert cli("facts", "purge", "2", "--yes", "--json").json() == {"id": 2, "status": "purged"}
    assert [f["id"] for f in cli("facts", "list", "--all", "--json").json()] == [3]


def test_update_links_the_names_the_new_text_names_and_drops_the_old(cli):
    assert cli("facts", "add", "The user lives in Lisbon").stdout.strip() == (
        "Created fact 1 about Lisbon.")
    cli("facts", "update", "1", "The user lives in Porto")
    assert [f["id"] for f in cli("facts", "probe", "Porto", "--json").json()] == [2]
    assert cli("facts", "probe", "Lisbon", "--json").json() == []
    assert cli("facts", "show", "2", "--json").json()["entities"] == ["Porto"]


def test_entities_and_alias(cli):
    add(cli, "We run Postgres 16 at home", "-e", "PostgreSQL")
    alias = cli("facts", "alias", "PostgreSQL", "pg", "--json").json()
    assert alias["aliases"] == ["pg"]
    assert len(cli("facts", "probe", "PG", "--json").json()) == 1
    listed = cli("facts", "entities", "--json").json()
    assert listed == [{"id": 1, "name": "PostgreSQL", "aliases": ["pg"], "facts": 1,
                       "created_at": listed[0]["created_at"]}]
    assert "PostgreSQL (also: pg): 1 fact" in cli("facts", "entities").stdout


@pytest.mark.parametrize(
    "args",
    [
        ("show", "99"), ("rate", "99", "helpful"), ("update", "99", "new text"),
        ("forget", "99"), ("restore", "99"), ("purge", "99", "--yes"), ("history", "99"),
    ],
)
def test_unknown_ids_exit_1_with_one_line(cli, args):
    result = cli("facts", *args)
    assert result.exit_code == 1
    assert result.stderr.strip() == "Error: No fact with id 99 for user 'owner'."


def test_refused_writes_exit_1_and_store_nothing(cli):
    for args in (("add", "api_key = abcd1234efgh"), ("add", "x", "--category", "gossip"),
                 ("add", "   ")):
        result = cli("facts", *args)
        assert result.exit_code == 1 and result.stderr.startswith("Error: Refused")
    add(cli, "Gina likes jazz", "-e", "Gina")
    assert cli("facts", "restore", "1").exit_code == 1  # not forgotten
    assert cli("facts", "list", "--all", "--json").json()[0]["content"] == "Gina likes jazz"


def test_hard_query_strings_through_the_cli(cli):
    add(cli, "Pinned the client to v2.3.1 for alice@example.com, see C++ notes")
    for query in ("v2.3.1", "alice@example.com", "C++", "NOT", "中文"):
        result = cli("facts", "search", query, "--json")
        assert result.exit_code == 0, (query, result.stderr)
    for query in ("?", '"'):  # no words at all: a clear error, never a traceback
        result = cli("facts", "search", query, "--json")
        assert result.exit_code == 1 and "Nothing to search for" in result.stderr
    assert cli("facts", "search", "v2.3.1", "--json").json()[0]["id"] == 1


def test_every_command_is_scoped_to_its_user(cli):
    assert add(cli, "Lee's locker is 42", "-e", "Lee", "--user", "alice")["id"] == 1
    add(cli, "Lee works with Kim", "-e", "Lee", "-e", "Kim", "-u", "alice")
    # owner sees nothing of alice's
    for args in (("search", "locker"), ("probe", "Lee"), ("reason", "Lee", "Kim"),
                 ("list", "--all"), ("entities",)):
        assert cli("facts", *args, "--json").json() == [], args
    for args in (("show", "1"), ("rate", "1", "unhelpful"), ("update", "1", "changed text"),
                 ("forget", "1"), ("restore", "1"), ("purge", "1", "--yes"), ("history", "1")):
        assert cli("facts", *args).exit_code == 1, args
    # and alice still has everything, untouched
    mine = cli("facts", "show", "1", "-u", "alice", "--json").json()
    assert mine["trust"] == 0.5 and mine["status"] == "active"
    assert len(cli("facts", "probe", "Lee", "-u", "alice", "--json").json()) == 2
    assert len(cli("facts", "history", "1", "-u", "alice", "--json").json()) == 1
    assert cli("facts", "search", "locker", "-u", "alice", "--json").json()[0]["id"] == 1
    # the same text for another user is a new fact, not a duplicate
    assert add(cli, "Lee's locker is 42", "-e", "Lee") == {"id": 3, "status": "created"}


@pytest.mark.parametrize("fact_id", ["99999999999999999999", "9223372036854775808"])
@pytest.mark.parametrize(
    "args",
    [("show",), ("rate", "helpful"), ("update", "new text"), ("forget",), ("restore",),
     ("purge", "--yes"), ("history",)],
)
def test_ids_beyond_sqlite_range_are_not_found_in_one_line(cli, args, fact_id):
    add(cli, "Gina likes jazz", "-e", "Gina")
    result = cli("facts", args[0], fact_id, *args[1:])
    assert result.exit_code == 1
    assert result.stderr.strip() == f"Error: No fact with id {fact_id} for user 'owner'."
    assert len(cli("facts", "list", "--json").json()) == 1


@pytest.mark.parametrize("name", ['"', "---", "  ", "()"])
def test_an_entity_name_without_letters_or_digits_is_refused(cli, name):
    result = cli("facts", "add", "Bob likes tea", "-e", name)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: Refused") and "letters or digits" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert cli("facts", "list", "--json").json() == []
    assert cli("facts", "entities", "--json").json() == []
    ok = add(cli, "Bob likes tea", "-e", "Bob", "-e", "tea")
    assert cli("facts", "show", str(ok["id"]), "--json").json()["entities"] == ["Bob", "tea"]


def test_a_query_with_no_words_is_a_clear_error_like_session_search(cli):
    cli("facts", "add", "Alice uses vim")
    for query in ["", "?!", "   "]:
        facts = cli("facts", "search", query)
        sessions = cli("sessions", "search", query)
        assert facts.exit_code == sessions.exit_code == 1
        assert "Nothing to search for" in facts.stderr and "Traceback" not in facts.stderr


def test_an_unknown_category_names_the_known_ones(cli, config_file):
    config_file.write_text("facts:\n  categories: [general, project, hobby]\n")
    add(cli, "Dana climbs on Sundays", "--category", "hobby")
    for command in (("list",), ("search", "climbs")):
        for args in ((), ("--json",)):
            result = cli("facts", *command, "--category", "nope", *args)
            assert (result.exit_code, result.stdout) == (1, "")
            assert result.stderr == ("Error: Unknown category 'nope': the categories are "
                                     "general, project, hobby (facts.categories).\n")
        # A known category with nothing in it is simply empty.
        assert cli("facts", *command, "--category", "project").stdout == "No facts found.\n"
    # A category since removed from the config still lists what was kept under it.
    config_file.write_text("facts:\n  categories: [general, project]\n")
    kept = cli("facts", "list", "--category", "hobby", "--json")
    assert [f["content"] for f in kept.json()] == ["Dana climbs on Sundays"]
