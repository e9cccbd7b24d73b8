"""Reading users' data files with bounds: every loader of the suite opens files through here.

A data file is untrusted input: it may be a FIFO that never ends, a symlink to ``/dev/zero``, a
gzip bomb, a file in another encoding, or a single line of a gigabyte. These helpers refuse such
files up front and stop reading at a stated limit, and every error is a :class:`DataFileError`
whose message starts with ``FILE`` or ``FILE:LINE`` and says what to do.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import stat
import zlib
from pathlib import Path
from typing import Iterator

_CHUNK = 1 << 20


class DataFileError(ValueError):
    """A data file that cannot be loaded; the message names the file (and line) and the fix."""


def check_data_path(path: str | os.PathLike, *, what: str = "data file") -> Path:
    """Return ``path`` as a :class:`Path` if it names a regular file (following symlinks).

    Raises:
        DataFileError: the path does not exist, is a directory, or is a special file (FIFO,
            socket, character or block device, including through a symlink).
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise DataFileError(f"{p}: {what} not found; check the path.") from None
    except OSError as err:
        raise DataFileError(f"{p}: cannot read {what} ({err.strerror}).") from None
    if stat.S_ISDIR(st.st_mode):
        raise DataFileError(f"{p}: is a directory; give the path of a {what}.")
    if not stat.S_ISREG(st.st_mode):
        raise DataFileError(f"{p}: is not a regular file (a FIFO, socket or device); copy the data into a file first.")
    return p


def _is_gzip(p: Path) -> bool:
    return p.suffix == ".gz"


def _open_binary(p: Path) -> io.BufferedIOBase:
    return gzip.open(p, "rb") if _is_gzip(p) else open(p, "rb")


def read_data_bytes(path: str | os.PathLike, *, max_bytes: int, what: str = "data file") -> bytes:
    """Read a whole regular file (gunzipping ``.gz``), refusing more than ``max_bytes`` of content.

    Raises:
        DataFileError: see :func:`check_data_path`; the content (decompressed) exceeds
            ``max_bytes``; a ``.gz`` file is corrupt or truncated.
    """
    p = check_data_path(path, what=what)
    chunks: list[bytes] = []
    total = 0
    try:
        with _open_binary(p) as handle:
            while True:
                chunk = handle.read(min(_CHUNK, max_bytes + 1 - total))
                if not chunk:
                    break
                total += len(chunk)
                if total > max_bytes:
                    raise DataFileError(
                        f"{p}: {what} holds more than {max_bytes:,} bytes"
                        f"{' (decompressed)' if _is_gzip(p) else ''}, the limit; split it or raise the limit."
                    )
                chunks.append(chunk)
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise DataFileError(f"{p}: corrupt or truncated gzip file ({err}); re-create it.") from None
    return b"".join(chunks)


def iter_text_lines(
    path: str | os.PathLike,
    *,
    max_bytes: int,
    max_line_chars: int,
    what: str = "data file",
) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` (1-based, without the line break) from a UTF-8 text or ``.gz`` file.

    A UTF-8 byte-order mark at the start is skipped; ``\\r\\n`` line endings are accepted.

    Raises:
        DataFileError: see :func:`check_data_path`; ``FILE:LINE`` for invalid UTF-8 or a line
            longer than ``max_line_chars``; more than ``max_bytes`` of content; a corrupt ``.gz``.
    """
    p = check_data_path(path, what=what)
    cap = 4 * max_line_chars + 3  # UTF-8 needs at most 4 bytes a character, plus the line break

    def too_long(line: int) -> str:
        return (
            f"{p}:{line}: line longer than {max_line_chars:,} characters, the limit; "
            "check the file's format (one record per line)."
        )

    total = 0
    line_no = 0
    try:
        with _open_binary(p) as handle:
            while True:
                # readline with a cap never holds more than one over-long line's prefix in memory.
                raw = handle.readline(cap)
                if not raw:
                    return
                line_no += 1
                total += len(raw)
                if total > max_bytes:
                    raise DataFileError(
                        f"{p}:{line_no}: {what} holds more than {max_bytes:,} bytes, the limit; "
                        "split it or raise the limit."
                    )
                if len(raw) >= cap and not raw.endswith(b"\n"):
                    raise DataFileError(too_long(line_no))
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise DataFileError(
                        f"{p}:{line_no}: not valid UTF-8 (byte {err.start + 1} of the line); convert the file to UTF-8."
                    ) from None
                if line_no == 1 and text.startswith("\ufeff"):
                    text = text[1:]
                if text.endswith("\n"):
                    text = text[:-1]
                    if text.endswith("\r"):
                        text = text[:-1]
                if len(text) > max_line_chars:
                    raise DataFileError(too_long(line_no))
                yield line_no, text
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise DataFileError(f"{p}:{line_no + 1}: corrupt or truncated gzip file ({err}); re-create it.") from None


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 (hex) of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
