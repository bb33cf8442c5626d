"""Reading run directories (what :class:`agentrl.training.trainer.Trainer` writes) for reports.

A run directory holds ``config.yaml`` and ``metrics.jsonl`` (one record per iteration, eval
numbers merged into the record of the iteration they ran after), ``eval/iter_N.jsonl`` (the
evaluation episodes with the V/Q the algorithm read), and ``summary.json`` once finished. A
report argument may be a run directory or any folder holding run directories (a ``bench``
output), so ``agentrl report OUT`` finds every seed of every algorithm.

Runs are grouped by their settings with the seed left out: runs that differ only in their seed
are seeds of one group; two SAPO groups that differ in, say, ``algorithm.value_squash`` are
labelled by that difference.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentrl.errors import UserError
from agentrl.rundir.fingerprint import read as read_fingerprints
from agentrl.rundir.layout import CHECKPOINTS_DIR, CONFIG_FILE, METRICS_FILE, SUMMARY_FILE
from agentrl.rundir.settings import NOT_GROUPED, UNREAD_SECTIONS, flatten
from agentrl.rundir.yaml_input import read_yaml_file

#: The sections every run's config.yaml holds (agentrl writes the whole resolved config).
RUN_SECTIONS = ("env", "model", "rollout", "train", "algorithm")


def is_run_dir(path: Path) -> bool:
    return (path / CONFIG_FILE).is_file() and (path / METRICS_FILE).is_file()


def show_value(value: Any) -> str:
    """A setting as text, compact and stable (mappings as inline YAML)."""
    if isinstance(value, (dict, list)):
        return yaml.safe_dump(value, default_flow_style=True, sort_keys=True).strip()
    if value is None:
        return "null"
    return str(value)


@dataclass
class BenchSession:
    """What ``agentrl bench`` recorded about the invocation that last touched a run."""

    command: str
    started: str
    finished: str | None
    machine: dict[str, str]
    action: str  # fresh, resumed, extended, restarted, skipped
    run_state: str = ""  # this run's state when the session last wrote: running, done, failed...
    run_started: str | None = None  # this run's own times in the session (recorded since
    run_finished: str | None = None  # 2026-12-02; older manifests have only the session's)
    #: the run's process's resident set before the run loaded anything (recorded since
    #: 2026-12-02)
    rss_at_start_gb: float | None = None
    #: another run trained before this one in the same process (bench ran every run in its
    #: own process only from 2026-12-02, ``run_isolation``): this run's peak RSS may include
    #: what that one left resident
    inherited_memory: bool = False


@dataclass
class Run:
    path: Path
    config: dict[str, Any]
    records: list[dict[str, Any]]
    summary: dict[str, Any] | None = None
    bench: BenchSession | None = None  # the latest session that trained it
    skipped_lines: int = 0
    fingerprints: dict[str, Any] | None = None  # fingerprint.json: what train and eval played
    #: every bench session that trained it, oldest first (a comparison runs in pieces, and one
    #: run's iterations may come from several sessions and machines)
    sessions: list[BenchSession] = field(default_factory=list)

    @property
    def algo(self) -> str:
        return str(self.config.get("algo", "?"))

    @property
    def seed(self) -> int | None:
        value = (self.config.get("train") or {}).get("seed")
        return value if isinstance(value, int) else None

    @property
    def planned_iterations(self) -> int | None:
        value = (self.config.get("train") or {}).get("iterations")
        return value if isinstance(value, int) else None

    @property
    def done_iterations(self) -> int:
        return int(self.records[-1].get("iteration", len(self.records))) if self.records else 0

    @property
    def finished(self) -> bool:
        return self.summary is not None

    @property
    def memory_inherited(self) -> bool:
        """Some of its iterations ran in a process that still held an earlier run's memory."""
        return any(s.inherited_memory for s in self.sessions)

    @property
    def flat_config(self) -> dict[str, Any]:
        return flatten(self.config)

    @property
    def settings(self) -> dict[str, Any]:
        """The settings that make runs comparable: the flat config less bookkeeping and the
        sections an RL run never reads."""
        return {
            k: v
            for k, v in self.flat_config.items()
            if k not in NOT_GROUPED and not k.startswith(UNREAD_SECTIONS)
        }

    def values(self, key: str) -> list[tuple[dict[str, Any], float]]:
        """``(record, value)`` for every record where ``key`` is a finite number."""
        out = []
        for record in self.records:
            value = record.get(key)
            if (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isfinite(value)
            ):
                out.append((record, float(value)))
        return out

    def has(self, key: str) -> bool:
        return bool(self.values(key))

    def last_eval(self) -> dict[str, Any] | None:
        """The latest record that carries eval numbers (the final eval of a finished run)."""
        for record in reversed(self.records):
            if isinstance(record.get("eval/success_rate"), (int, float)):
                return record
        return None

    def eval_files(self) -> list[Path]:
        folder = self.path / "eval"
        return sorted(folder.glob("iter_*.jsonl")) if folder.is_dir() else []

    def eval_episodes(
        self, iteration: int | None = None
    ) -> tuple[int, list[dict[str, Any]]] | None:
        """``(iteration, episodes)`` from ``eval/iter_N.jsonl``: ``iteration`` or the latest."""
        files = self.eval_files()
        if iteration is not None:
            files = [f for f in files if _iteration_of(f) == iteration]
        if not files:
            return None
        chosen = files[-1]
        episodes = []
        for line in chosen.read_text().splitlines():
            if line.strip():
                try:
                    episodes.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return _iteration_of(chosen), episodes

    def command(self) -> str:
        """The command that redoes this run: its resolved config says everything."""
        return f"agentrl run {self.algo} --config {self.path / 'config.yaml'}"


def _iteration_of(path: Path) -> int:
    try:
        return int(path.stem.split("_", 1)[1])
    except (IndexError, ValueError):
        return -1


@dataclass
class RunGroup:
    """The seeds of one algorithm (and setting): what a curve with a band is drawn from."""

    label: str
    algo: str
    runs: list[Run] = field(default_factory=list)

    @property
    def seeds(self) -> list[int | None]:
        return [r.seed for r in self.runs]

    def with_key(self, key: str) -> list[Run]:
        return [r for r in self.runs if r.has(key)]


# --- loading -------------------------------------------------------------------------------------


def load_run(path: Path) -> Run:
    """Read one run directory; a broken config or metrics file is the user's to fix."""
    config_path = path / CONFIG_FILE
    config = read_yaml_file(config_path, "Run config file")  # not UTF-8, not YAML: one sentence
    if not isinstance(config, dict) or "algo" not in config:
        raise UserError(f"'{config_path}' is not an agentrl run config (it has no 'algo').")
    missing = [name for name in RUN_SECTIONS if not isinstance(config.get(name), dict)]
    if missing or not isinstance(config["algo"], str):
        lacks = f"its sections {', '.join(missing)} are missing" if missing else "its 'algo' is not a name"
        raise UserError(f"'{config_path}' is not an agentrl run config ({lacks}; agentrl writes every section).")
    by_iteration: dict[int, dict[str, Any]] = {}
    try:
        lines = (path / METRICS_FILE).read_bytes().decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise UserError(f"'{path / 'metrics.jsonl'}' is not UTF-8 text; it is not an agentrl metrics log.") from None
    skipped = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):  # a run killed while writing its last line
                skipped += 1
                continue
            raise UserError(
                f"'{path / 'metrics.jsonl'}' line {number} is not JSON ({exc.msg})."
            ) from exc
        if isinstance(record, dict) and isinstance(record.get("iteration"), int):
            by_iteration[record["iteration"]] = record  # a resumed run rewrote it: keep the last
    summary = None
    if (path / SUMMARY_FILE).is_file():
        try:
            summary = json.loads((path / SUMMARY_FILE).read_text())
        except json.JSONDecodeError:
            summary = None
    records = [by_iteration[i] for i in sorted(by_iteration)]
    if records and not any(_has_metrics(r) for r in records):
        raise UserError(f"'{path / 'metrics.jsonl'}' is not an agentrl metrics log: its records hold no "
                        f"rollout/ or eval/ numbers.")
    sessions = _bench_sessions(path)
    return Run(path, config, records, summary, sessions[-1] if sessions else None, skipped,
               read_fingerprints(path), sessions)


def _has_metrics(record: dict[str, Any]) -> bool:
    """A training or eval record: every record agentrl writes has rollout/ or eval/ numbers."""
    return any(key.startswith(("rollout/", "eval/")) and isinstance(value, (int, float))
               for key, value in record.items())


def check_bench_manifest(folder: Path) -> None:
    """A ``bench.json`` in ``folder`` is a mapping whose ``sessions`` is a list of mappings, each
    with a list of run mappings (what ``agentrl bench`` writes); anything else is one sentence."""
    manifest = folder / "bench.json"
    if not manifest.is_file():
        return
    try:
        data = json.loads(manifest.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"'{manifest}' is not an agentrl bench manifest (not JSON text: {exc}).") from None
    sessions = data.get("sessions") if isinstance(data, dict) else None
    if not isinstance(sessions, list) or not all(
            isinstance(s, dict) and isinstance(s.get("runs", []), list)
            and all(isinstance(r, dict) for r in s.get("runs", [])) for s in sessions):
        raise UserError(f"'{manifest}' is not an agentrl bench manifest (a mapping whose 'sessions' list "
                        f"holds sessions with lists of runs).")


def _trained(action: str | None, state: str | None) -> bool:
    """Whether a session actually trained a run, from its manifest entry's action and state
    (it was not skipped, and the session reached it)."""
    return action != "skip" and state not in ("queued", "skipped")


def _bench_sessions(path: Path) -> list[BenchSession]:
    """The ``bench.json`` sessions that trained this run, oldest first (bench puts the manifest
    two levels up).

    A session that only skipped a finished run did not run it: its machine and dates would be
    the wrong ones to report (a comparison run in pieces across sessions and machines), so
    skips count only when nothing else touched the run (then the latest one stands)."""
    resolved = path.resolve()
    for folder in (resolved.parent.parent, resolved.parent):
        manifest = folder / "bench.json"
        if not manifest.is_file():
            continue
        try:
            check_bench_manifest(folder)
            data = json.loads(manifest.read_text())
        except UserError:
            return []
        touched = [
            BenchSession(
                session.get("command", ""),
                session.get("started", ""),
                session.get("finished"),
                session.get("machine", {}),
                run.get("action", ""),
                run.get("state", ""),
                run.get("started"),
                run.get("finished"),
                run.get("rss_at_start_gb"),
                session.get("run_isolation") != "process"
                and any(
                    _trained(before.get("action"), before.get("state"))
                    for before in session.get("runs", [])[:position]
                ),
            )
            for session in data.get("sessions", [])
            for position, run in enumerate(session.get("runs", []))
            if Path(run.get("run_dir", "")).resolve() == resolved
        ]
        # planned but never reached (the session was stopped first): it did not train the run
        trained = [s for s in touched if _trained(s.action, s.run_state)]
        # a fresh start or a restart begins the run from nothing: what sessions before it made
        # was cleared, so they made none of what the folder holds
        starts = [i for i, s in enumerate(trained) if s.action in ("fresh", "restart")]
        if starts:
            trained = trained[starts[-1]:]
        return trained or touched[-1:]
    return []


def discover_runs(paths: Sequence[Path]) -> tuple[list[Run], list[str]]:
    """Every run under ``paths`` (run dirs, or folders holding them), and notes on runs left out.

    Raises :class:`UserError` for a path that does not exist, a file, a folder with no run in
    it, or when no run has a single iteration recorded.
    """
    if not paths:
        raise UserError(
            "Give at least one run directory (or a folder of runs, e.g. a bench output)."
        )
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise UserError(f"'{path}' does not exist.")
        if not path.is_dir():
            raise UserError(f"'{path}' is a file, not a run directory.")
        check_bench_manifest(path)
        if is_run_dir(path):
            found.append(path)
            continue
        inside = sorted(
            p.parent
            for p in path.rglob(METRICS_FILE)
            if is_run_dir(p.parent) and CHECKPOINTS_DIR not in p.parts
        )
        if not inside:
            raise UserError(
                f"'{path}' is not a run directory (no config.yaml and metrics.jsonl) "
                "and holds none."
            )
        found.extend(inside)
    seen: set[Path] = set()
    runs, notes = [], []
    for path in found:
        key = path.resolve()
        if key in seen:
            continue
        seen.add(key)
        run = load_run(path)
        if not run.records:
            notes.append(f"{path}: left out, no iteration recorded yet.")
            continue
        runs.append(run)
    if not runs:
        raise UserError("None of the runs has a recorded iteration yet; nothing to report.")
    return runs, notes


def group_runs(runs: Iterable[Run]) -> list[RunGroup]:
    """Runs with equal settings (seed and bookkeeping left out) form one group.

    Groups are ordered sapo, ppo, grpo, then others by name; a label is the algorithm's name,
    plus the settings that set it apart when one algorithm has several groups.
    """
    by_key: dict[str, list[Run]] = {}
    for run in runs:
        key = json.dumps(run.settings, sort_keys=True, default=str)
        by_key.setdefault(key, []).append(run)
    groups = []
    per_algo: dict[str, list[list[Run]]] = {}
    for members in by_key.values():
        per_algo.setdefault(members[0].algo, []).append(members)
    for algo, variants in per_algo.items():
        varying = _varying_keys([m[0] for m in variants])
        for members in variants:
            members.sort(key=lambda r: (r.seed is None, r.seed or 0, str(r.path)))
            label = algo
            if len(variants) > 1:
                flat = members[0].flat_config
                label += (
                    " ("
                    + ", ".join(f"{_short(k)}={show_value(flat.get(k))}" for k in varying)
                    + ")"
                )
            groups.append(RunGroup(label, algo, members))
    order = {"sapo": 0, "ppo": 1, "grpo": 2}
    groups.sort(key=lambda g: (order.get(g.algo, 3), g.label))
    return groups


def _short(key: str) -> str:
    """``algorithm.value_squash`` -> ``value_squash``; other sections keep their name."""
    return key.removeprefix("algorithm.")


def _varying_keys(runs: Sequence[Run]) -> list[str]:
    flats = [r.settings for r in runs]
    keys = sorted(set().union(*flats)) if flats else []
    return [
        k
        for k in keys
        if len({json.dumps(f.get(k), sort_keys=True, default=str) for f in flats}) > 1
    ]


def settings_table(groups: Sequence[RunGroup]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(settings shared by every group, {setting: value per group} for those that differ)."""
    firsts = [g.runs[0] for g in groups]
    flats = [r.settings for r in firsts]
    varying = set(_varying_keys(firsts))
    shared = {k: show_value(v) for k, v in sorted(flats[0].items()) if k not in varying}
    differing = {k: [show_value(f[k]) if k in f else "-" for f in flats] for k in sorted(varying)}
    return shared, differing
