"""Errors that carry a message meant for a person (or a model) and the exit code the CLI uses."""

from __future__ import annotations


class HermesError(Exception):
    """Base class: the message is complete and safe to show without a traceback."""

    exit_code = 1


class ConfigError(HermesError):
    """The configuration file or an override is broken."""

    exit_code = 2


class RefusedWrite(HermesError):
    """A memory write was refused (over the cap, a secret, an injection); nothing changed."""

    exit_code = 1


class NotFound(HermesError):
    """An id or name that does not exist for this user."""

    exit_code = 1


class QueryError(HermesError):
    """A search query could not be turned into anything searchable."""

    exit_code = 1


class StorageError(HermesError):
    """A file Hermes keeps its state in is damaged, unreadable or cannot be written (a corrupt
    database, a full disk, a directory where a file should be). Nothing the user typed is wrong,
    so the exit code is that of a broken environment."""

    exit_code = 2
