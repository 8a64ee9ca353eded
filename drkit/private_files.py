"""Files only their owner reads: the state dir, the SQLite store, a failback's export of
application records, Spark specs, keys.

Whatever the umask, a file made here is created 0600 and a directory 0700.  A file is written
under a fresh random name beside its final one (``mkstemp``: ``O_EXCL``, so a symlink planted at
a predictable temporary name is never followed) and renamed into place only once written: a
reader never sees half a file, and a failed write leaves the old one (or none).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

FILE_MODE, DIR_MODE = 0o600, 0o700


def private_dir(path: Path) -> Path:
    """``path`` as a directory; created (parents too) for its owner only.  A directory that
    exists is left as it is: it may be the operator's own."""
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        path.chmod(DIR_MODE)  # mkdir's mode went through the umask
    return path


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
    """``path`` created empty and 0600 unless it exists (a store that SQLite then opens, and
    whose journal files SQLite gives the same mode).  A symlink there is not followed."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    except FileExistsError:
        return
    os.close(descriptor)
