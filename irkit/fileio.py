"""Atomic file output.

Every file irkit writes goes through :func:`atomic_write`: the bytes go to a
temporary file in the destination's folder, are flushed and fsynced, and the
temporary file is renamed over the destination.  A crash or a kill at any
moment leaves either the old file or the complete new one, never half a file;
and when the output path equals the input path nothing is lost before the new
content is complete.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


def atomic_write(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, then rename)."""
    with atomic_open(path, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO]:
    """Open a temp file beside ``path``; on success it replaces ``path``, on error it vanishes."""
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if p.exists():
            with contextlib.suppress(OSError):
                os.chmod(tmp, p.stat().st_mode & 0o777)
        else:
            with contextlib.suppress(OSError):
                os.chmod(tmp, 0o644)
        os.replace(tmp, p)
        with contextlib.suppress(OSError):
            dfd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


__all__ = ["atomic_write", "atomic_open"]
