"""Files only their owner reads: the state dir, the SQLite store, a failback's export of
application records, Spark specs, keys.

Whatever the umask, a file made here is created 0600 and a directory 0700.  A file is written
under a fresh random name beside its final one (``mkstemp``: ``O_EXCL``, so a symlink planted at
a predictable temporary name is never followed) and renamed into place only once written: a
reader never sees half a file, and a failed write leaves the old one (or none).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

FILE_MODE, DIR_MODE = 0o600, 0o700


def private_dir(path: Path) -> Path:
    """``path`` as a directory; created (parents too) for its owner only.  One that exists
    loses group's and others' access when this user owns it (:func:`tighten`)."""
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        path.chmod(DIR_MODE)  # mkdir's mode went through the umask
    else:
        tighten(path)
    return path


def tighten(path: Path) -> bool:
    """Take group's and others' access to ``path`` away when this process's user owns it
    (not a symlink's target): an install from before drkit made its files private kept a
    0755 state dir and a 0644 store - which holds the flows' signing keys.  Returns whether
    the mode changed (said in a warning: the operator may have meant to share it)."""
    try:
        status = path.lstat()
    except OSError:
        return False
    if stat.S_ISLNK(status.st_mode) or status.st_uid != os.geteuid():
        return False
    mode = stat.S_IMODE(status.st_mode)
    if not mode & 0o077:
        return False
    path.chmod(mode & ~0o077)
    log.warning(
        "made private: others could read it (drkit's state holds signing keys)",
        extra={"path": str(path), "was": f"{mode:o}", "now": f"{mode & ~0o077:o}"},
    )
    return True


@contextlib.contextmanager
def private_file(path: Path, binary: bool = False) -> Iterator[IO[Any]]:
    """A handle to write ``path`` through: a 0600 file beside it, renamed onto ``path`` when
    the block ends without an error, removed when it raises."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    partial = Path(name)
    try:
        with os.fdopen(descriptor, "wb" if binary else "w", encoding=None if binary else "utf-8"
                       ) as handle:  # fmt: skip
            yield handle
        partial.replace(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def write_private(path: Path, content: bytes | str) -> None:
    """``path`` holding ``content``, readable by its owner only (see the module docstring)."""
    with private_file(path, binary=isinstance(content, bytes)) as handle:
        handle.write(content)


def create_private(path: Path) -> None:
    """``path`` created empty and 0600 (a store that SQLite then opens, and whose journal
    files SQLite gives the same mode); one that exists is tightened (:func:`tighten`).  A
    symlink there is not followed."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    except FileExistsError:
        tighten(path)
        return
    os.close(descriptor)


def open_private_append(path: Path) -> IO[str]:
    """``path`` opened for appending, created 0600 (an existing one tightened); a symlink
    there is not followed."""
    tighten(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
    return os.fdopen(os.open(path, flags, FILE_MODE), "a", encoding="utf-8")
