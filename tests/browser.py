"""Debian's chromium through Playwright, for the web panel's browser tests.

In CI (CI=true) a missing browser fails these tests; on a developer machine they are skipped
with the reason (`apt-get install chromium`, `pip install -e '.[test]'`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

SHOTS = Path(__file__).resolve().parent.parent / "bench-results"
CHROMIUM = os.environ.get("HERMES_TEST_CHROMIUM", "/usr/bin/chromium")
# As root (CI) chromium needs --no-sandbox; the rest keep it from reaching the network.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
TIMEOUT_MS = 15000
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]')"
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        return f"no chromium at {CHROMIUM} (apt-get install chromium)"
    return None


MISSING = _missing()


def browser_mark() -> pytest.MarkDecorator:
    """The module's pytestmark: skipped without a browser (a failure in CI)."""
    if MISSING and os.environ.get("CI") == "true":
        pytest.fail(f"browser tests cannot run in CI: {MISSING}", pytrace=False)
    return pytest.mark.skipif(MISSING is not None, reason=MISSING or "")


@contextlib.contextmanager
def launched() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@contextlib.contextmanager
def screenshot_on_failure(page, name: str) -> Iterator[None]:  # type: ignore[no-untyped-def]
    try:
        yield
    except BaseException:
        SHOTS.mkdir(exist_ok=True)
        with contextlib.suppress(Exception):
            page.screenshot(path=str(SHOTS / f"web-{name}.png"), full_page=True)
        raise
