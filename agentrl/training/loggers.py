"""Streaming a run's metrics to where people watch runs: TensorBoard and Weights & Biases.

The run directory's ``metrics.jsonl`` stays the record of truth (reports, resume and bench read
it); the sinks here are views of the same records, opened by the trainer on the main process and
chosen by ``train.loggers`` (``--logger tensorboard,wandb`` on the command line).

* ``tensorboard``: event files under ``RUN/tensorboard`` (``tensorboard --logdir runs``), one
  scalar per numeric metric at step = iteration, the run config as a text entry.
* ``wandb``: a W&B run in ``RUN/wandb``. Offline unless ``WANDB_MODE`` says otherwise, so it works
  with no network and no account; ``wandb sync RUN/wandb/offline-run-*`` uploads it later. The run
  config is attached; the W&B run id is derived from the run directory, so a resumed run appends
  to the same W&B run.

Only numbers are logged (strings such as the env id live in config and summary). Metrics keep
their namespaced names (``rollout/success_rate``, ``time/actor_update``), which both tools group
by the part before the slash.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from agentrl.errors import UserError

LOGGERS = ("tensorboard", "wandb")


class MetricSink(Protocol):
    def log(self, record: dict[str, Any], step: int) -> None: ...

    def close(self) -> None: ...


def numeric_metrics(record: dict[str, Any]) -> dict[str, float]:
    """The finite numbers of a metrics record (bools and strings left out)."""
    out = {}
    for key, value in record.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(float(value)):
            out[key] = float(value)
    return out


class TensorBoardSink:
    def __init__(self, run_dir: Path, config_text: str):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:  # the tensorboard package is missing
            raise UserError("train.loggers includes tensorboard, which is not installed: pip install tensorboard.") from exc
        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))
        self.writer.add_text("config", "```\n" + config_text + "\n```", global_step=0)

    def log(self, record: dict[str, Any], step: int) -> None:
        for key, value in numeric_metrics(record).items():
            self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def wandb_run_id(run_dir: Path) -> str:
    """A stable W&B id for a run directory: a resumed run logs into the same W&B run."""
    return hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:16]


class WandbSink:
    def __init__(self, run_dir: Path, config: dict[str, Any], name: str):
        try:
            import wandb
        except ImportError as exc:
            raise UserError("train.loggers includes wandb, which is not installed: pip install wandb.") from exc
        run_dir.mkdir(parents=True, exist_ok=True)
        mode = os.environ.get("WANDB_MODE", "offline")  # no network needed unless asked for
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "agentrl"), name=name,
                              id=wandb_run_id(run_dir), resume="allow", dir=str(run_dir), mode=mode,
                              config=config, settings=wandb.Settings(silent=True, console="off"))

    def log(self, record: dict[str, Any], step: int) -> None:
        self.run.log(numeric_metrics(record), step=step)

    def close(self) -> None:
        self.run.finish()


def check_logger_names(names: Sequence[str]) -> None:
    unknown = [n for n in names if n not in LOGGERS]
    if unknown:
        raise UserError(f"Unknown logger {unknown[0]!r} in train.loggers; choose from {', '.join(LOGGERS)}.")


def open_sinks(names: Sequence[str], run_dir: Path, config: dict[str, Any], config_text: str) -> list[MetricSink]:
    """The sinks named in ``train.loggers``, opened on ``run_dir``."""
    check_logger_names(names)
    sinks: list[MetricSink] = []
    for name in dict.fromkeys(names):
        if name == "tensorboard":
            sinks.append(TensorBoardSink(run_dir, config_text))
        else:
            sinks.append(WandbSink(run_dir, config, run_dir.name))
    return sinks
