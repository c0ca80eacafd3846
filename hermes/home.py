"""Where the home is when nothing names it, and keeping what is in it private.

One home whatever the working directory: ``--home`` or ``$HERMES_HOME`` when given, else the
config's ``home`` (relative to the config file's folder), else :func:`default_home`: the
checkout's own ``data/`` when Hermes runs from a source checkout (an editable install or
``python -m hermes`` in a clone), the per-user data folder (platformdirs: ``~/.local/share/hermes``
on Linux) when it is installed as a package. Hermes used to keep its home in ``./data`` of the
folder it was started in; :func:`old_home_note` finds such a folder and says how to keep it.

Everything in the home is the user's memory (conversations, facts, logs, tokens), so it is
readable by its owner alone: the home is made 0700 and every file Hermes creates 0600, whatever
the umask (:data:`PRIVATE_UMASK` at every entry point, explicit modes where the store creates the
home and the database). :func:`loose_modes` finds what is not, for `hermes doctor` and the daemon.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

# Files Hermes creates are rw for their owner only, folders rwx for their owner only.
PRIVATE_UMASK = 0o077
HOME_MODE = 0o700
FILE_MODE = 0o600
# How many loose files `hermes doctor` names before "and N more".
NAMED = 3


def source_checkout() -> Path | None:
    """The source tree this Hermes runs from (its pyproject.toml beside the package), or None
    when it is installed as a package (site-packages has no pyproject.toml)."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() else None


def default_home() -> Path:
    """The home when neither --home, $HERMES_HOME nor the config's ``home`` names one."""
    checkout = source_checkout()
    if checkout is not None:
        return checkout / "data"
    import platformdirs

    return Path(platformdirs.user_data_dir("hermes", appauthor=False))


def make_home(home: Path) -> bool:
    """Create ``home`` (and missing parents) readable by its owner alone; True when it was
    created now. An existing home's mode is left as it is (`hermes doctor` reports it)."""
    if home.is_dir():
        return False
    home.mkdir(parents=True, exist_ok=True, mode=HOME_MODE)
    os.chmod(home, HOME_MODE)  # mkdir's mode passes through the umask; this does not
    return True


def make_private_dirs(path: Path) -> None:
    """Create the folder ``path`` and its missing parents, each 0700 whatever the umask (a
    folder Hermes makes holds memory: the cache, the vector files, the database's folder). An
    existing folder is left as it is (`hermes doctor` reports a loose one); ``path`` existing
    as something else than a folder raises FileExistsError, as ``mkdir(exist_ok=True)``."""
    missing: list[Path] = []
    folder = path
    while not os.path.lexists(folder) and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, HOME_MODE)
        except FileExistsError:
            continue  # made meanwhile by another process: theirs to say
        os.chmod(folder, HOME_MODE)  # mkdir's mode passes through the umask; this does not
    if not path.is_dir():
        raise FileExistsError(f"{path} exists and is not a folder")


def write_private_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (its folders made by :func:`make_private_dirs`), the file
    0600 whatever the umask, an existing file's mode made 0600 too."""
    make_private_dirs(path.parent)
    with open(path, "w", encoding="utf-8", opener=private_opener) as out:
        out.write(text)
    os.chmod(path, FILE_MODE)


def create_private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 if it does not exist (a file SQLite or another
    library then opens: SQLite gives the -wal and -shm files the database file's mode)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return
    except OSError:
        return  # not creatable (a read-only folder): the open that follows says why, as before
    os.close(fd)


def private_opener(path: str, flags: int) -> int:
    """``open(..., opener=private_opener)``: a file it creates is 0600, whatever the umask."""
    return os.open(path, flags, FILE_MODE)


@dataclass
class LooseModes:
    """What in a home other accounts could read: the home itself (its mode, when it is looser
    than 0700) and files under it with group or other bits. (A folder inside is closed by
    the home's 0700, whatever its own mode.)"""

    home: Path
    home_mode: int | None
    paths: list[tuple[Path, int]]

    def __bool__(self) -> bool:
        return self.home_mode is not None or bool(self.paths)

    def describe(self) -> str:
        parts = []
        if self.home_mode is not None:
            parts.append(f"the home is {self.home_mode:04o}")
        if self.paths:
            named = ", ".join(f"{p.relative_to(self.home)} {m:04o}" for p, m in self.paths[:NAMED])
            more = f" and {len(self.paths) - NAMED} more" if len(self.paths) > NAMED else ""
            parts.append(f"{len(self.paths)} file(s) not 0600 ({named}{more})")
        return "; ".join(parts)

    def advice(self) -> str:
        return f"chmod -R go-rwx {self.home}"


def loose_modes(home: Path) -> LooseModes:
    """The home's mode when looser than 0700, and every file under it with group or other
    permission bits (symlinks are not followed: their own mode means nothing)."""
    try:
        mode = stat.S_IMODE(home.stat().st_mode)
    except OSError:
        return LooseModes(home, None, [])
    found: list[tuple[Path, int]] = []
    for folder, _dirs, files in os.walk(home):
        for name in files:
            path = Path(folder) / name
            try:
                info = path.lstat()
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                continue
            if info.st_mode & 0o077:
                found.append((path, stat.S_IMODE(info.st_mode)))
    return LooseModes(home, mode if mode & 0o077 else None, sorted(found))


def old_home_note(home: Path, cwd: Path) -> str | None:
    """A note for a person whose memory is in ``./data`` of the folder they are in, from the
    time Hermes kept its home in the folder it was started in, when that is not ``home``
    (the default home in use); None when there is no such folder."""
    old = cwd / "data"
    if not (old / "hermes.db").is_file():
        return None
    try:
        if old.resolve() == home.resolve():
            return None
    except OSError:
        return None
    if home.exists():
        created = time.strftime("%Y-%m-%d", time.localtime(home.stat().st_ctime))
        move = (f"stop Hermes, then `mv {home} {home}.new && mv {old.resolve()} {home}` "
                f"(what {home} holds, since {created}, stays in {home}.new)")
    else:
        move = f"stop Hermes, then `mv {old.resolve()} {home}`"
    return (f"Note: {old.resolve()} holds Hermes memory from when Hermes kept its home in the "
            f"folder it was started in; it now uses one home, {home}. To keep that memory, "
            f"move it there: {move}; or go on using it where it is: "
            f"`export HERMES_HOME={old.resolve()}`.")
