"""``agentrl bench`` supervised: the planned runs trained one after another, each in a process of
its own (:mod:`agentrl.bench.process`), and ``OUT/bench.json``, the manifest of every session.

What is drawn while it runs is the caller's: :func:`run_bench` takes a ``view``, a callable that
opens a context (the CLI's live table, :mod:`agentrl.cli.bench_view`) around the loop, given the
plan and the runs' statuses it may read while they change.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from agentrl.bench.plan import BENCH_FILE, BenchPlan, PlannedRun, RunStatus
from agentrl.errors import UserError
from agentrl.rundir.layout import (
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    EVAL_DIR,
    METRICS_FILE,
    SAMPLES_DIR,
    SUMMARY_FILE,
)
from agentrl.rundir.machine import describe_machine

#: What draws a running bench: called with the plan and the live statuses, it returns a context
#: the loop runs inside (None: nothing is drawn).
BenchView = Callable[[BenchPlan, list[RunStatus]], AbstractContextManager[Any]]


class Manifest:
    """``OUT/bench.json``: every bench invocation on this folder, appended, never rewritten away."""

    def __init__(self, plan: BenchPlan):
        self.path = plan.out / BENCH_FILE
        data: dict[str, Any] = {}
        if self.path.is_file():
            try:
                data = json.loads(self.path.read_text())
            except json.JSONDecodeError:
                data = {}
            if not isinstance(data, dict) or not isinstance(data.get("sessions", []), list):
                raise UserError(f"'{self.path}' is not an agentrl bench manifest (a mapping with a list of "
                                f"sessions); move it away or choose another --out.")
        self.data = data
        self.data["trajectories_per_iteration"] = plan.trajectories
        self.session: dict[str, Any] = {
            "command": plan.command,
            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "finished": None,
            # each run in a process of its own (agentrl.bench.process): its memory is its own
            "run_isolation": "process",
            "machine": describe_machine(),
            "runs": [
                {
                    "algo": r.algo,
                    "seed": r.seed,
                    "run_dir": str(r.run_dir.resolve()),
                    "action": r.action,
                    "state": "queued",
                }
                for r in plan.runs
            ],
        }
        self.data.setdefault("sessions", []).append(self.session)

    def update(self, index: int, state: str, warning: str = "", **fields: Any) -> None:
        """Record a run's state; its own start and end times too, since a comparison run in
        pieces is usually killed, never finished, so the session's end says nothing about
        when a run inside it finished."""
        entry = self.session["runs"][index]
        entry["state"] = state
        now = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        if state == "running":
            entry["started"] = now
        elif state in ("done", "failed", "interrupted", "paused"):  # this session's work on it ended
            entry["finished"] = now
        if warning:
            entry["warning"] = warning
        entry.update(fields)
        self.write()

    def finish(self, ended: str = "completed") -> None:
        """The session's end and how it came (``ended``: completed, time limit, interrupted by
        SIGINT, ...), so an interrupted session does not read as still running."""
        self.session["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        self.session["ended"] = ended
        self.write()

    def write(self) -> None:
        from agentrl.rundir.durable import atomic_write_text

        self.path.parent.mkdir(parents=True, exist_ok=True)
        # replaced in one rename: a kill mid-write must not turn the sessions' history into {}
        atomic_write_text(self.path, json.dumps(self.data, indent=2) + "\n")


def how_it_ended(exc: BaseException) -> str:
    """A bench session's end, in words, from the exception that ended it."""
    import signal

    if isinstance(exc, KeyboardInterrupt):
        return "interrupted by SIGINT"
    if isinstance(exc, SystemExit) and isinstance(exc.code, int) and exc.code > 128:
        try:
            return f"stopped by {signal.Signals(exc.code - 128).name}"  # run_process's exit code
        except ValueError:
            pass
    if isinstance(exc, UserError):
        return f"stopped by a user error: {exc}"
    return f"failed: {type(exc).__name__}"


def _clear_partial(folder: Path) -> None:
    """A run that wrote records but no checkpoint cannot be resumed: drop what it wrote."""
    for name in (METRICS_FILE, SUMMARY_FILE, CONFIG_FILE):
        (folder / name).unlink(missing_ok=True)
    for name in (EVAL_DIR, SAMPLES_DIR, CHECKPOINTS_DIR):
        shutil.rmtree(folder / name, ignore_errors=True)


def run_bench(
    plan: BenchPlan,
    view: BenchView | None = None,
    on_iteration: Callable[[PlannedRun, dict[str, Any]], None] | None = None,
    time_limit_s: float | None = None,
) -> list[RunStatus]:
    """Run every planned run in order, inside ``view`` (what the caller draws; None: nothing).

    ``time_limit_s``: once the bench has run that long, the current run checkpoints at the end
    of its iteration (state ``paused``) and no further run starts; running the same plan again
    resumes there. A comparison done in pieces then ends each piece cleanly instead of being
    killed and losing the iterations since the last ``train.save_every`` checkpoint."""
    plan.out.mkdir(parents=True, exist_ok=True)
    statuses = [
        RunStatus(r, state="done (kept)" if r.action == "skip" else "queued") for r in plan.runs
    ]
    for status in statuses:
        if status.run.action == "skip":
            status.iteration = status.run.config.train.iterations
            status.record = _last_record(status.run.run_dir)
    manifest = Manifest(plan)
    # wall-clock time: the run's own process reads the same deadline
    deadline = None if time_limit_s is None else time.time() + time_limit_s
    if time_limit_s is not None:
        manifest.session["time_limit_minutes"] = round(time_limit_s / 60, 2)
    manifest.write()
    try:
        _run_statuses(plan, statuses, manifest, view, on_iteration, deadline)
    except BaseException as exc:  # a kill or Ctrl-C too: the manifest says how the session ended
        manifest.finish(how_it_ended(exc))
        raise
    paused = any(status.state == "paused" for status in statuses)
    queued = any(status.state == "queued" for status in statuses)
    manifest.finish("time limit" if paused or queued else "completed")
    return statuses


def _run_statuses(
    plan: BenchPlan,
    statuses: list[RunStatus],
    manifest: Manifest,
    view: BenchView | None,
    on_iteration: Callable[[PlannedRun, dict[str, Any]], None] | None,
    deadline: float | None,
) -> None:
    """The bench's loop: each planned run in its own process, in order, inside ``view``."""
    from agentrl.bench.process import run_isolated

    def out_of_time() -> bool:
        return deadline is not None and time.time() >= deadline

    with view(plan, statuses) if view is not None else contextlib.nullcontext():
        for index, status in enumerate(statuses):
            planned = status.run
            if planned.action == "skip":
                manifest.update(index, "skipped")
                continue
            # the rest stay queued for the next piece; a piece always trains at least one
            # iteration, so each invocation makes progress whatever the limit
            if out_of_time() and any(st.started is not None for st in statuses):
                break
            if planned.action == "restart":
                _clear_partial(planned.run_dir)
            status.state = {"resume": "resuming", "extend": "extending"}.get(
                planned.action, "loading"
            )
            status.started = time.monotonic()

            def started(start_iteration: int, rss: float | None, index: int = index,
                        status: RunStatus = status) -> None:
                status.iteration = start_iteration
                status.state = "running"
                # what the run's process held before it loaded anything: libraries only
                manifest.update(index, "running", rss_at_start_gb=rss)

            def record_iteration(record: dict[str, Any], status: RunStatus = status) -> None:
                status.iteration = int(record.get("iteration", status.iteration))
                status.record = record
                seen, it = record.get("trajectories"), record.get("iteration")
                if (
                    isinstance(seen, (int, float))
                    and isinstance(it, int)
                    and seen != plan.trajectories * it
                ):
                    status.warning = (
                        f"{seen / it:g} trajectories/iteration, not {plan.trajectories}"
                    )
                if on_iteration is not None:
                    on_iteration(status.run, record)

            try:
                result = run_isolated(
                    planned.config,
                    planned.action in ("resume", "extend"),
                    f"{planned.algo} seed {planned.seed}",
                    started,
                    record_iteration,
                    deadline,
                )
                status.state = "paused" if result.stopped else "done"
            except BaseException as exc:
                stopped = isinstance(exc, (KeyboardInterrupt, SystemExit))
                status.state = "interrupted" if stopped else "failed"
                manifest.update(index, status.state)
                raise
            finally:
                status.finished = time.monotonic()
            manifest.update(index, status.state, status.warning)


def _last_record(run_dir: Path) -> dict[str, Any]:
    """The last whole record (a line cut off by a kill is skipped, not taken as no record)."""
    from agentrl.rundir.metrics import read_records

    records = read_records(run_dir / METRICS_FILE)
    return records[-1] if records else {}
