"""The README and docs/ cannot drift: generated parts are current, every relative link and
#anchor leads somewhere, the README's commands are the ones CI runs, and it stays short."""

from __future__ import annotations

import re
import shlex
import sys
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import gen_docs  # noqa: E402

FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`+[^`]*`+")


def _docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _prose_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) outside fenced code blocks."""
    inside, lines = False, []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line.lstrip()):
            inside = not inside
            continue
        if not inside:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in _prose_lines(path):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match[1])
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(paths: list[Path]) -> list[str]:
    broken = []
    for path in paths:
        for number, line in _prose_lines(path):
            for target in LINK.findall(CODE_SPAN.sub("", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
                    continue
                file_part, _, anchor = target.partition("#")
                dest = (path.parent / file_part).resolve() if file_part else path
                where = f"{path.relative_to(ROOT)}:{number}: {target}"
                if not dest.exists():
                    broken.append(f"{where} (no such file)")
                elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
                    broken.append(f"{where} (no heading #{anchor} in {dest.name})")
    return broken


def test_every_relative_link_and_anchor_resolves():
    assert broken_links(_docs()) == []


def test_the_link_check_finds_a_moved_heading_and_a_missing_page(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## How a turn works\n\n```\n## not a heading\n```\n",
                    encoding="utf-8")
    (tmp_path / "links.md").write_text(
        "[ok](page.md#how-a-turn-works) [self](#links) `[code](nowhere.md)`\n"
        "[gone](page.md#how-a-turn-worked) [fenced](page.md#not-a-heading) [404](nope.md)\n"
        "# Links\n", encoding="utf-8")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        found = broken_links([tmp_path / "links.md"])
    finally:
        ROOT = saved
    assert found == [
        "links.md:2: page.md#how-a-turn-worked (no heading #how-a-turn-worked in page.md)",
        "links.md:2: page.md#not-a-heading (no heading #not-a-heading in page.md)",
        "links.md:2: nope.md (no such file)"]


def test_github_anchors():
    assert slug("Moving and backing up memory: `hermes export`, `hermes import`") == \
        "moving-and-backing-up-memory-hermes-export-hermes-import"
    assert slug("What keeps session R@5 from 0.93") == "what-keeps-session-r5-from-093"


def test_generated_parts_are_current():
    stale = gen_docs.stale_files()
    assert stale == [], (f"stale generated docs: {[str(p.relative_to(ROOT)) for p in stale]}; "
                         "run `python scripts/gen_docs.py`")


def test_the_cli_reference_is_every_commands_help():
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert "<!-- generated: cli-reference -->" in text
    assert "### `hermes facts`" in text and "#### `hermes facts search`" in text
    assert "Usage: hermes facts search [OPTIONS]" in text
    # a stale block is found, and rendering puts it right
    old = text.replace("Show the parts of each score.", "Show every part of each score.")
    assert old != text and gen_docs.render(old) == text


def test_every_setting_is_in_config_yaml_and_the_table():
    from pydantic import BaseModel

    from hermes.config import Settings

    yaml_text = (ROOT / "config.yaml").read_text(encoding="utf-8")
    table = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = []
    for section, field in Settings.model_fields.items():
        model = field.annotation
        keys = list(model.model_fields) if isinstance(model, type) and \
            issubclass(model, BaseModel) else [None]
        for key in keys:
            name = f"{section}.{key}" if key else section
            if not re.search(rf"^\s*{key or section}:", yaml_text, re.M):
                missing.append(f"config.yaml lacks {name}")
            if f"`{name}`" not in table:
                missing.append(f"docs/configuration.md lacks {name}")
    assert missing == []


def test_the_readme_is_a_five_minute_read_with_cis_own_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 400
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    marker = ci.index("# The README's test command, verbatim:")
    test_command = ci[marker + 1]
    assert test_command in readme.splitlines(), "README: show .ci/run's test command verbatim"
    run_command = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/hermes run"
    assert run_command in readme.splitlines()
    # The quick start sets a model before the command that starts Hermes
    assert readme.index("HERMES_MODEL__NAME") < readme.index(run_command, readme.index(
        "## Quick start"))


def test_every_docs_page_is_in_the_index():
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"index.md"}
    assert {p for p in pages if f"]({p})" not in index} == set()


@pytest.fixture(scope="module")
def minilm():
    """One real MiniLM for this file's examples (each CLI call would load its own)."""
    from hermes.memory.embeddings.embedders import MiniLM

    return MiniLM()


@pytest.fixture
def default_config(config_file, monkeypatch, minilm):
    """The configuration a new user has: hybrid recall with MiniLM (the suite's is words only
    with a toy model)."""
    from hermes.memory.embeddings import embedders as embeddings

    config_file.write_text("sessions:\n  embeddings: true\n", encoding="utf-8")
    monkeypatch.setitem(embeddings.MODELS, "minilm", lambda: minilm)


def _example(text: str, after: str) -> list[str]:
    """The lines of the first code block after the paragraph starting with ``after``."""
    start = text.index("```\n", text.index(after)) + 4
    return text[start:text.index("```", start)].splitlines()


async def test_the_readmes_tour_prints_what_the_readme_shows(rt, cli, default_config, tmp_path):
    """The tour's REPL lines and `hermes facts` lines, run as the tour runs them: the default
    configuration (hybrid recall with the real MiniLM), the fact remembered in the REPL, found
    by its words at once and by meaning once `hermes sessions index` has embedded it."""
    from prompt_toolkit.history import FileHistory

    from hermes.agent.turn import Agent
    from hermes.frontends.repl import Repl

    readme = (ROOT / "README.md").read_text(encoding="utf-8")

    said: list[str] = []
    shell = Repl(rt.memory, Agent(rt.memory), emit=lambda kind, text: said.append(text),
                 history=FileHistory(str(tmp_path / "history")))
    lines = _example(readme, "**1. Tell it something in the REPL.**")
    for typed, shown in zip(lines[::2], lines[1::2], strict=True):
        assert typed.startswith("hermes> ")
        await shell.command(typed.removeprefix("hermes> "))
        assert said[-1] == shown

    def run(example: list[str]) -> list[str]:
        out = []
        for line in example:
            if line.startswith("$ .venv/bin/hermes "):
                result = cli(*shlex.split(line)[2:])
                assert result.exit_code == 0, result.stderr
                out += result.stdout.splitlines()
        return out

    by_words = _example(readme, "**3. Find it from the command line**")
    assert run(by_words) == [ln for ln in by_words if not ln.startswith("$")]
    assert cli("sessions", "index").exit_code == 0
    by_meaning = _example(readme, "Each result says why it was found.")
    (shown,) = [ln for ln in by_meaning if not ln.startswith("$")]
    (printed,) = run(by_meaning)
    # The cosine, to two places, may move by a hundredth on another CPU's kernels
    pattern = re.escape(shown).replace(r"0\.37", r"(0\.\d\d)")
    match = re.fullmatch(pattern, printed)
    assert match, printed
    assert abs(float(match[1]) - 0.37) <= 0.02


NUMBER = re.compile(r"\d+\.\d+")


def _same_output(shown: str, printed: str) -> bool:
    """Equal, but a decimal may differ by 0.02: a cosine or a score from the embedding model
    moves in its last places with the CPU's kernels; every word, id and count must match."""
    if NUMBER.sub("#", shown) != NUMBER.sub("#", printed):
        return False
    return all(abs(float(a) - float(b)) <= 0.02
               for a, b in zip(NUMBER.findall(shown), NUMBER.findall(printed), strict=True))


def replay(cli, lines: list[str], prompt: str = "$ hermes ") -> list[str]:
    """Run every ``$ hermes ...`` line of an example through the real CLI; the lines the
    example shows after it that the command did not print (or printed otherwise)."""
    wrong: list[str] = []
    command: list[str] | None = None
    expected: list[str] = []

    def check() -> None:
        if command is None:
            return
        result = cli(*command)
        printed = (result.stdout + result.stderr).splitlines()
        if len(printed) != len(expected) or not all(
                _same_output(a, b) for a, b in zip(expected, printed, strict=True)):
            wrong.append(f"hermes {' '.join(command)}:\n  shown   {expected}\n  printed {printed}")

    for line in lines:
        if line.startswith(prompt):
            check()
            command, expected = shlex.split(line.removeprefix(prompt)), []
        else:
            expected.append(line)
    check()
    return wrong


def test_the_replay_finds_a_changed_line(cli):
    assert _same_output("(meaning 0.69; trust 0.50)", "(meaning 0.67; trust 0.50)")
    assert not _same_output("(meaning 0.69; trust 0.50)", "(meaning 0.59; trust 0.50)")
    assert not _same_output("[1] a (trust 0.50)", "[2] a (trust 0.50)")
    added = ["$ hermes memory add 'Runs Debian'", "Added [1]. Basic memory now 15/8,000 chars."]
    assert replay(cli, added) == []
    assert replay(cli, ["$ hermes memory add 'Runs Debian'", "Added [9]."]) != []


def test_the_memory_pages_examples_are_what_hermes_prints(cli, default_config):
    """docs/memory.md's `hermes memory` and `hermes facts` examples, run on a new home in the
    default configuration (hybrid recall with the real MiniLM)."""
    page = (ROOT / "docs" / "memory.md").read_text(encoding="utf-8")
    basic = _example(page, "## Basic memory")
    facts = _example(page, "## The fact store")
    assert len(basic) >= 6 and len(facts) >= 30
    assert replay(cli, basic) == []
    assert replay(cli, facts) == []


def test_other_pages_examples_are_what_hermes_prints(cli):
    """Examples that need no history: the guard's refusal, the plugin list."""
    secrets = (ROOT / "docs" / "secrets.md").read_text(encoding="utf-8")
    plugins = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    assert replay(cli, _example(secrets, "**Every field of every write is checked**")) == []
    assert replay(cli, _example(plugins, "`hermes plugins` (`--json`) lists")) == []


def test_the_cron_pages_example_is_what_hermes_prints(cli, config_file):
    """docs/cron.md's config, then its commands, on the test clock (2026-11-29 12:00 UTC)."""
    import yaml

    page = (ROOT / "docs" / "cron.md").read_text(encoding="utf-8")
    start = page.index("```yaml\n") + len("```yaml\n")
    config = page[start:page.index("```", start)]
    assert [job["name"] for job in yaml.safe_load(config)["cron"]["jobs"]] == [
        "daily-digest", "weekly-review"]
    config_file.write_text(config, encoding="utf-8")
    example = _example(page, "and one added from the command line:")
    assert len(example) == 13 and replay(cli, example) == []


COMMAND = re.compile(r"(?:^\$ |`|^hermes> )hermes((?: --?[a-z-]+(?: [^\s`]+)?)*) ([a-z][a-z-]*)"
                     r"(?: ([a-z][a-z-]*))?", re.M)


def unknown_commands(texts: dict[str, str]) -> list[str]:
    """`hermes NAME [SUB]` in prose or examples where NAME or SUB is no command (renamed,
    removed, misspelt)."""
    from hermes.cli import COMMANDS, load_command

    unknown = []
    for name, text in texts.items():
        for match in COMMAND.finditer(text):
            command, sub = match[2], match[3]
            group = load_command(command) if command in COMMANDS else None
            subs = getattr(group, "commands", None)
            if group is None or (subs is not None and sub and sub not in subs
                                 and not getattr(group, "invoke_without_command", False)):
                unknown.append(f"{name}: {match[0]}")
    return unknown


def test_every_command_the_docs_name_exists():
    texts = {p.name: p.read_text(encoding="utf-8") for p in _docs() if p.name != "cli.md"}
    assert unknown_commands(texts) == []
    assert unknown_commands({"x.md": "Run `hermes facts frobnicate` or `hermes memroy show`,\n"
                                     "$ hermes --home /tmp/h facts serch x\n"}) == [
        "x.md: `hermes facts frobnicate", "x.md: `hermes memroy show",
        "x.md: $ hermes --home /tmp/h facts serch"]


def missing_paths(texts: dict[str, str], root: Path) -> list[str]:
    """`hermes/...`, `scripts/...` and `tests/...` paths the docs name that do not exist (a
    module moved or renamed)."""
    return [f"{name}: {match[1]}" for name, text in texts.items()
            for match in re.finditer(r"`((?:hermes|scripts|tests)/[\w./-]*\w/?)`", text)
            if not (root / match[1]).exists()]


def test_every_file_the_docs_name_exists(tmp_path):
    texts = {p.name: p.read_text(encoding="utf-8") for p in _docs()}
    assert missing_paths(texts, ROOT) == []
    (tmp_path / "hermes").mkdir()
    (tmp_path / "hermes" / "turn.py").write_text("", encoding="utf-8")
    assert missing_paths({"x.md": "`hermes/turn.py` and `hermes/agent/turn.py`"}, tmp_path) == [
        "x.md: hermes/agent/turn.py"]


def unknown_modules(table: str, root: Path) -> list[str]:
    """Files and folders named in the module table of docs/architecture.md (`hermes/x/` rows
    naming `y.py`, `z/` inside) that no longer exist anywhere under hermes/."""
    present = {str(p.relative_to(root)) + ("/" if p.is_dir() else "")
               for p in (root / "hermes").rglob("*") if "__pycache__" not in p.parts}
    unknown = []
    for line in table.splitlines():
        if not line.startswith("| `hermes"):
            continue
        for name in re.findall(r"`([\w/]+(?:\.py|\.md|/))`", line):
            if not any(p == name or p.endswith("/" + name) for p in present):
                unknown.append(name)
    return unknown


def test_every_module_in_the_architecture_table_exists(tmp_path):
    table = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert unknown_modules(table, ROOT) == []
    (tmp_path / "hermes" / "agent").mkdir(parents=True)
    (tmp_path / "hermes" / "agent" / "turn.py").write_text("", encoding="utf-8")
    assert unknown_modules("| `hermes/agent/` | `turn.py` (one turn), `feedback.py` (gone) |",
                           tmp_path) == ["feedback.py"]
