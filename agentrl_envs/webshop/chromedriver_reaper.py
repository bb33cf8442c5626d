"""Run chromedriver so that no browser process outlives it, not even as a zombie.

Usage: ``python chromedriver_reaper.py /usr/bin/chromedriver --port=N ...`` (selenium starts
it in place of chromedriver; see :mod:`.browser_transport`). This file is run as a script and
imports nothing from the package.

Why: when chromedriver or Chromium is killed (a crash, or a test that kills it), Chromium's
helper processes are orphaned. An orphan is adopted by PID 1, and on many containers PID 1 never
reaps, so dead helpers stay as zombies. This process declares itself a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``), so orphans below it are adopted by it instead; it reaps them
as they exit, and when chromedriver exits it kills whatever is left below it, reaps it, and
exits too. It also asks the kernel to send it SIGTERM if its parent (the Python process that
owns the env) dies, so a killed trainer leaves no browser behind either.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(entry))
    return found


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for child in _children_of(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def _reap_all(deadline: float) -> None:
    """Reap exited children until none is left or the deadline passes."""
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.02)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: chromedriver_reaper.py CHROMEDRIVER [ARGS...]", file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    parent = os.getppid()

    driver = os.posix_spawn(argv[1], argv[1:], os.environ)

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(driver, signal.SIGTERM)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    if os.getppid() != parent:  # the parent died before PDEATHSIG was armed
        forward(signal.SIGTERM, None)

    code = 1
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except OSError as exc:  # EINTR is retried by Python; anything else: give up waiting
            if exc.errno != errno.EINTR:
                break
            continue
        if pid == driver:
            code = os.waitstatus_to_exitcode(status)
            break

    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:  # repeat: a helper may fork while we are killing
        left = _descendants(os.getpid())
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _reap_all(time.monotonic() + 0.5)
        if not left:
            break
    return code if code >= 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
