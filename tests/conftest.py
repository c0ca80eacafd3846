"""Shared fixtures: every test gets its own HERMES_HOME, a config with hybrid recall off (words
only, as most tests assert) and a fake clock; the default embedding model is a toy."""

from __future__ import annotations

import json
import os
import re
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes.clock import FakeClock
from hermes.config import Settings, load_settings
from hermes.runtime import Runtime


@pytest.fixture(autouse=True)
def hermes_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point all user state at a temp dir, and keep the developer's environment out."""
    for key in list(os.environ):
        if key.startswith("HERMES_") or key in {"DISCORD_TOKEN"}:
            monkeypatch.delenv(key, raising=False)
    home = tmp_path / "home"
    config = tmp_path / "config.yaml"
    # Hybrid recall is on by default; a test searches by words only unless it turns it on
    # (or writes its own config: then the toy model below stands in for MiniLM)
    config.write_text("sessions:\n  embeddings: false\n", encoding="utf-8")
    monkeypatch.setenv("HERMES_HOME", str(home))
    monkeypatch.setenv("HERMES_CONFIG", str(config))
    return home


class WordsEmbedder:
    """A toy embedding model: each word hashed to one of 64 axes. It stands in for MiniLM,
    the default model of hybrid recall (on by default), so that tests never load the real one
    (0.5 s and 120 MB a time) unless they build ``MiniLM()`` themselves."""

    model_id = "toy-words"

    def embed(self, texts):
        import numpy as np

        out = np.zeros((len(texts), 64), dtype=np.float32)
        out[:, 63] = 0.01  # never a zero vector
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, zlib.crc32(word.encode()) % 63] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed_query(self, text):
        return self.embed([text])[0]


@pytest.fixture(autouse=True)
def toy_default_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default model, as every Memory builds it (hermes.memory.embeddings.embedders.MODELS, the
    factories the built-in plugin registers), is the toy above."""
    from hermes.memory.embeddings import embedders as embeddings

    monkeypatch.setitem(embeddings.MODELS, "minilm", WordsEmbedder)


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    return tmp_path / "config.yaml"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock("2026-11-29T12:00:00+00:00")


@pytest.fixture
def settings() -> Settings:
    return load_settings()


@pytest.fixture
def rt(settings: Settings, clock: FakeClock):
    runtime = Runtime(settings, clock=clock)
    yield runtime
    runtime.close()


@pytest.fixture
def db(rt: Runtime):
    return rt.db


class CliResult:
    def __init__(self, result) -> None:
        self.exit_code: int = result.exit_code
        self.stdout: str = result.stdout
        self.stderr: str = result.stderr
        self.exception = result.exception

    def json(self):
        return json.loads(self.stdout)


@pytest.fixture
def cli(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> Callable[..., CliResult]:
    """Run the real `hermes` command line in-process: ``cli("memory", "show", "--json")``.

    Its Runtime reads the test's clock (the ``clock`` fixture), as ``rt`` does: a command that
    counts back from "now" (``stats --since 7d``) must not depend on today's date."""
    import hermes.cli
    from hermes.cli import app

    class ClockedRuntime(Runtime):
        def __init__(self, settings: Settings) -> None:
            super().__init__(settings, clock=clock)

    monkeypatch.setattr(hermes.cli, "Runtime", ClockedRuntime)
    runner = CliRunner()

    def run(*args: str, input: str | None = None) -> CliResult:
        result = runner.invoke(app, list(args), input=input, catch_exceptions=False)
        return CliResult(result)

    return run


@pytest.fixture
def fake_model(monkeypatch: pytest.MonkeyPatch):
    """The scripted model, configured as ``fake/scripted`` for this test (config via env).

    Backoff sleeps return at once and are recorded in ``fake_model.sleeps``.
    """
    from hermes.agent import llm
    from tests.fakellm import ScriptedLLM, installed

    fake = ScriptedLLM()

    async def no_sleep(seconds: float) -> None:
        fake.sleeps.append(seconds)

    monkeypatch.setenv("HERMES_MODEL__NAME", "fake/scripted")
    monkeypatch.setattr(llm, "default_sleep", no_sleep)
    with installed(fake):
        yield fake
