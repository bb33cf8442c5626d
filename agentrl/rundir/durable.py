"""Durable file writes for the run directory: whole-file replacement and whole-line appends.

A run can be killed at any instant (SIGKILL, OOM killer, a preempted node, a power cut). What it
leaves on disk must then be either the old state or the new one, never a mix:

* :func:`atomic_write_text` writes a temporary file in the same folder, fsyncs it, then
  ``os.replace``-s it over the target and fsyncs the folder (rename is atomic on POSIX file
  systems; the folder fsync makes the rename itself survive a power cut).
* :func:`append_line` appends a record with one ``write`` call on an ``O_APPEND`` descriptor and
  fsyncs it, so a record is either wholly there or at worst cut off at the very end of the file,
  which the readers tolerate.

:func:`crash_point` is a test hook: ``AGENTRL_CRASH_AT=<point>@<iteration>`` makes the process
SIGKILL itself at that named point, so tests can reproduce a kill at the worst moment exactly
(tests/test_resume.py; the points are listed in docs/architecture.md, "Run directory").
"""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

from agentrl.errors import UserError

#: The environment variable read by :func:`crash_point` (tests only).
CRASH_ENV = "AGENTRL_CRASH_AT"


def crash_point(point: str, iteration: int) -> None:
    """SIGKILL this process when ``AGENTRL_CRASH_AT`` names ``point@iteration`` (test hook).

    SIGKILL, not an exception: nothing is flushed or cleaned up, exactly as with a real kill.
    """
    wanted = os.environ.get(CRASH_ENV)
    if wanted and wanted == f"{point}@{iteration}":
        os.kill(os.getpid(), signal.SIGKILL)


def fsync_dir(folder: Path) -> None:
    """Persist a folder's entries (a rename or a new file) and not only the files' contents."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return  # e.g. a file system without directory handles: nothing more can be done
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """Flush one file's contents to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(folder: Path) -> None:
    """Flush every file below ``folder`` and every folder's entries (a checkpoint before its
    rename: the rename must not reach the disk before the files it names)."""
    for root, _dirs, files in os.walk(folder):
        for name in files:
            fsync_file(Path(root) / name)
        fsync_dir(Path(root))


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk is full: ``OSError(ENOSPC)`` (or the quota's ``EDQUOT``),
    or the text a library that wraps it leaves (safetensors' ``StorageFull``, a C++ writer's
    "No space left on device")."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc)
    return "No space left on device" in text or "StorageFull" in text


def folder_bytes(folder: Path) -> int:
    """Bytes of every file below ``folder`` (how much room a checkpoint like it needs)."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.path.getsize(Path(root) / name)
            except OSError:
                pass
    return total


def disk_full_error(path: Path, needed: int) -> UserError:
    """One sentence for a write the disk had no room for: the file and the bytes it needed."""
    return UserError(f"No space left on the device writing '{path}' ({needed:,} bytes needed); free some space "
                     "and rerun (a run continues from its last checkpoint with --resume).")


def temp_path(path: Path) -> Path:
    """The temporary name :func:`atomic_write_text` uses beside ``path`` (one writer per run)."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def atomic_write_text(path: Path, text: str, crash_name: str | None = None, iteration: int = 0) -> None:
    """Replace ``path`` by ``text`` so that a kill leaves either the old or the new content.

    ``crash_name``: the :func:`crash_point` checked between the synced temporary file and the
    rename (the moment a non-atomic write would have left a truncated file).
    """
    tmp = temp_path(path)
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        tmp.unlink(missing_ok=True)  # the old file is untouched; no half-written temporary stays
        if disk_full(exc):
            raise disk_full_error(path, len(text.encode("utf-8"))) from exc
        raise
    if crash_name is not None:
        crash_point(crash_name, iteration)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def append_line(path: Path, line: str) -> None:
    """Append ``line`` (plus a newline) with one write, then fsync.

    One ``os.write`` on an ``O_APPEND`` descriptor puts the record at the end in one piece;
    Python's buffered file objects may split a long record into several writes, so a kill
    between them would leave half a record followed by nothing.
    """
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = 0
        while written < len(data):  # a regular file takes it in one go; loop for the rare short write
            written += os.write(fd, data[written:])
        os.fsync(fd)
    except OSError as exc:
        if disk_full(exc):  # at worst a cut-off last line, which every reader skips
            raise disk_full_error(path, len(data)) from exc
        raise
    finally:
        os.close(fd)
