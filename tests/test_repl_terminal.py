"""`hermes chat` on a real terminal (tmux): a reply shows as it streams, the line being
written included, and a quiet "thinking…" stands there until the first text comes.

The model (tests.daemon_harness) stalls at ``<<stall>>`` until SIGUSR1, so what the screen shows
in between is what a person would see while waiting.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.web_client import hermes_env

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    """One tmux server of its own, one window running the command."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path,
                 width: int = 100) -> None:
        self.socket = f"hermes-test-{os.getpid()}"
        self.env = env
        # exec: the pane's process is the command itself (signals reach it, not a shell)
        subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", "new-session", "-d",
                        "-x", str(width), "-y", "20", "-c", str(cwd),
                        "exec " + shlex.join(command)],
                       env=env, check=True)

    def screen(self) -> str:
        return subprocess.run(["tmux", "-L", self.socket, "capture-pane", "-p"],
                              capture_output=True, text=True, check=True).stdout

    def wait_for(self, text: str, timeout: float = 60) -> str:
        """The screen once it shows ``text`` (polled: a terminal has no event to wait on)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            shown = self.screen()
            if text in shown:
                return shown
            time.sleep(0.05)
        raise AssertionError(f"{text!r} never showed:\n{self.screen()}")

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-L", self.socket, "send-keys", *keys], check=True)

    def pid(self) -> int:
        out = subprocess.run(["tmux", "-L", self.socket, "list-panes", "-F", "#{pane_pid}"],
                             capture_output=True, text=True, check=True).stdout
        return int(out.split()[0])

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


def test_a_reply_shows_as_it_streams_after_a_quiet_thinking(tmp_path):
    (tmp_path / "config.yaml").write_text("sessions:\n  embeddings: false\n", encoding="utf-8")
    replies = ["<<stall>>The Pi 5 wants a 27 W supply<<stall>>, and a fan.\nSecond line."]
    stalls = tmp_path / "stalls"
    env = hermes_env(tmp_path / "home", tmp_path / "config.yaml",
                     HERMES_TEST_REPLIES=json.dumps(replies), HERMES_TEST_STALLS=str(stalls),
                     TERM="xterm-256color")

    def release(stall: int) -> None:
        """Once the model waits at its ``stall``th stall, let it go on."""
        deadline = time.monotonic() + 60
        while not (stalls.exists() and len(stalls.read_text().splitlines()) >= stall):
            assert time.monotonic() < deadline, "the model never stalled"
            time.sleep(0.05)
        os.kill(tmux.pid(), signal.SIGUSR1)

    tmux = Tmux([sys.executable, "-m", "tests.daemon_harness", "chat"], env,
                Path(__file__).resolve().parent.parent)
    try:
        tmux.wait_for("hermes>")
        tmux.keys("Which power supply for the Pi 5?", "Enter")
        before = tmux.wait_for("thinking…")                        # nothing from the model yet
        assert "27 W" not in before
        release(1)
        during = tmux.wait_for("The Pi 5 wants a 27 W supply")    # half a line, no newline yet
        assert "thinking…" not in during and "a fan" not in during
        release(2)
        # A whole line is printed above the prompt a moment after the prompt has drawn the
        # next one (prompt_toolkit prints it on its loop): wait for the whole line, not for
        # "Second line." alone (under load the screen was taken in between).
        tmux.wait_for("The Pi 5 wants a 27 W supply, and a fan.")
        after = tmux.wait_for("Second line.")
        assert "The Pi 5 wants a 27 W supply, and a fan." in after
        assert "thinking…" not in after
    finally:
        tmux.kill()
