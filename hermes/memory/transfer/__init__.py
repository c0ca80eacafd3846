"""Moving a user's memory in and out, and rewriting it whole: :func:`export_user` (every tier
as JSON Lines with a sealed trailer, :mod:`.export`), :func:`import_user` (reading a file back
into the importing user's rows: its first pass :mod:`.file`, its resumable ledger
:mod:`.ledger`, the rows :mod:`.restore`), and :mod:`.redact_stored` (``hermes sessions
redact``: a user's stored rows rewritten with secrets redacted).

Transcript import is the sessions tier's (hermes.memory.sessions.transcripts); backups and table
counts the store's (hermes.store.maintenance)."""

from hermes.memory.transfer.export import (
    EXPORT_END,
    EXPORT_FORMAT,
    EXPORT_VERSION,
    EXPORTED_TABLES,
    NOT_EXPORTED,
    TABLES,
    ExportReport,
    export_pieces,
    export_user,
    sealed_lines,
)
from hermes.memory.transfer.restore import import_user

__all__ = ["EXPORTED_TABLES", "EXPORT_END", "EXPORT_FORMAT", "EXPORT_VERSION", "NOT_EXPORTED",
           "TABLES", "ExportReport", "export_pieces", "export_user", "import_user", "sealed_lines"]
