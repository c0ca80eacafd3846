"""Where log lines go: ``<home>/hermes.log`` always; the console only where nobody is talking.

`hermes run` adds a console handler (errors only while its REPL is on the terminal). Every other
command logs to the file alone: a retry, or background work that failed after an answer, is a
line in the log (and, for extraction, a run record that `hermes stats` shows), never text
printed around the answer.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from hermes.home import make_home, private_opener

if TYPE_CHECKING:
    from hermes.config import Settings

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def file_handler(settings: Settings) -> logging.Handler:
    """The rolling ``<home>/hermes.log``; the file is opened at the first line logged."""
    import logging.handlers

    config = settings.logging

    class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
        """The log quotes conversations: its owner's alone (0600) whatever the umask; a
        rotation renames the file, so hermes.log.1 ... keep the mode."""

        def _open(self) -> io.TextIOWrapper:
            handle = open(self.baseFilename, self.mode, encoding=self.encoding,  # noqa: SIM115
                          errors=self.errors, opener=private_opener)
            assert isinstance(handle, io.TextIOWrapper)
            return handle

    handler = PrivateRotatingFileHandler(
        settings.home_path / "hermes.log", encoding="utf-8", delay=True,
        maxBytes=int(config.file_max_mb * 1024 * 1024), backupCount=config.file_backups)
    handler.setLevel(config.file_level)
    handler.setFormatter(logging.Formatter(FORMAT))
    return handler


class _FileOnFirstLine(logging.Handler):
    """The file handler, built at the first line logged: most commands log nothing, and
    ``logging.handlers`` costs them an import."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.logging.file_level)
        self.settings = settings
        self.inner: logging.Handler | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.inner is None:
            try:
                make_home(self.settings.home_path)
            except OSError:
                return  # an unusable home is the command's one-line error, not the log's
            from hermes.safety.secrets import RedactingFilter

            self.inner = file_handler(self.settings)
            self.inner.addFilter(RedactingFilter())  # no secret is ever written to a log
        self.inner.handle(record)

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()
        super().close()


def replace_handlers(handlers: list[logging.Handler], level: int | str) -> Callable[[], None]:
    """Make ``handlers`` Hermes's handlers on the root logger (dropping earlier ones); returns
    a function that removes them again."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_hermes", False):
            root.removeHandler(handler)
            handler.close()
    for handler in handlers:
        handler._hermes = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(level)

    def remove() -> None:
        for handler in handlers:
            root.removeHandler(handler)
            handler.close()

    return remove


def quiet_libraries(settings: Settings) -> None:
    """Libraries that narrate every step at INFO: only their warnings, unless debugging."""
    config = settings.logging
    quiet = logging.DEBUG if "DEBUG" in (config.level, config.file_level) else logging.WARNING
    for name in ("apscheduler", "LiteLLM", "litellm", "httpx", "discord.gateway"):
        logging.getLogger(name).setLevel(quiet)


def log_to_file(settings: Settings) -> Callable[[], None]:
    """Log to the home's file only (every command but `hermes run`)."""
    quiet_libraries(settings)
    return replace_handlers([_FileOnFirstLine(settings)], settings.logging.file_level)
