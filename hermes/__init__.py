"""Hermes: a personal assistant daemon that never starts a conversation with amnesia."""

__version__ = "0.1.0"
