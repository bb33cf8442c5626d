"""Run chromedriver so that no browser process outlives it, not even as a zombie.

Usage: ``python chromedriver_reaper.py /usr/bin/chromedriver --port=N ...`` (selenium starts
it in place of chromedriver; see :mod:`.browser_transport`). This file is run as a script and
imports nothing from the package.

Why: when chromedriver or Chromium is killed (a crash, or a test that kills it), Chromium's
helper processes are orphaned. An orphan is adopted by PID 1, and on many containers PID 1 never
reaps, so dead helpers stay as zombies. This process declares itself a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``), so orphans below it are adopted by it instead; it reaps them
as they exit, and when chromedriver exits it kills whatever is left below it, reaps it, and
exits too. It also watches its parent (the Python process that owns the env): if that process
dies without closing the browser, the browser is stopped all the same, so a killed trainer
leaves nothing behind. (The kernel's parent-death signal is not used: it fires when the parent
*thread* ends, which would kill a browser started from a short-lived worker thread.)
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

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
    parent = os.getppid()
    driver = os.posix_spawn(argv[1], argv[1:], os.environ)
    stop_by: list[float] = []  # when chromedriver must be gone after a stop request

    def request_stop(_signum: int = signal.SIGTERM, _frame: object = None) -> None:
        if not stop_by:
            stop_by.append(time.monotonic() + 5.0)
            try:
                os.kill(driver, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    code = 1
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == driver:
            code = os.waitstatus_to_exitcode(status)
            break
        if pid != 0:
            continue  # an adopted orphan, now reaped
        if os.getppid() != parent:  # the owner died without closing the browser
            request_stop()
        if stop_by and time.monotonic() > stop_by[0]:
            try:
                os.kill(driver, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)

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
