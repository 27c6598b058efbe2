"""Keeping native libraries' chatter out of irkit's output.

libtpu prints a TPU-discovery block on file descriptor 2 when JAX first starts its
backends on a machine without a TPU, and TVM's code generator warns there during a
build.  Python's own ``sys.stderr`` cannot stop either: they write to the descriptor.
``IRKIT_VERBOSE=1`` (``irkit --verbose``) keeps everything.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """File descriptor 2 goes to a scratch file for the duration (errors still raise)."""
    if os.environ.get("IRKIT_VERBOSE"):
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def start_jax_quietly() -> None:
    """Start JAX's backends now, quietly, so that the first array a user's code makes (a model
    factory's weights) does not print libtpu's discovery block.  No-op without JAX."""
    import importlib.util

    if "jax" not in sys.modules and importlib.util.find_spec("jax") is None:
        return
    with quiet_native_stderr():
        import jax

        try:
            jax.devices()
        except RuntimeError:  # no backend at all: the user's code will say so itself
            pass


__all__ = ["quiet_native_stderr", "start_jax_quietly"]
