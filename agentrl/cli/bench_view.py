"""What ``agentrl bench`` draws while it runs: a rich table, one row per run, refreshed twice a
second (the ``view`` :func:`agentrl.bench.supervise.run_bench` runs inside)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from agentrl.bench.plan import BenchPlan, RunStatus
from agentrl.cli.common import fmt


def live_table(plan: BenchPlan, statuses: Sequence[RunStatus]) -> Any:
    """The rich table shown while the bench runs: one row per run."""
    table = Table(
        title=f"agentrl bench -> {plan.out}  ({plan.trajectories} trajectories / iteration)",
        header_style="bold",
    )
    for name, justify in (
        ("algo", "left"),
        ("seed", "right"),
        ("state", "left"),
        ("iteration", "right"),
        ("success", "right"),
        ("return", "right"),
        ("eval success", "right"),
        ("time/iteration (s)", "right"),
        ("elapsed (s)", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    now = time.monotonic()
    for status in statuses:
        planned = status.run.config.train.iterations
        elapsed = ""
        if status.started is not None:
            elapsed = f"{(status.finished or now) - status.started:.0f}"
        state = status.state + (f" ({status.warning})" if status.warning else "")
        table.add_row(
            status.run.algo,
            str(status.run.seed),
            state,
            f"{status.iteration}/{planned}",
            fmt(status.record.get("rollout/success_rate")),
            fmt(status.record.get("rollout/return")),
            fmt(status.record.get("eval/success_rate")),
            fmt(status.record.get("time/iteration"), 1),
            elapsed,
        )
    return table


def live_view(console: Console):
    """The bench's view on ``console``: a live table of the runs' statuses."""

    def view(plan: BenchPlan, statuses: list[RunStatus]) -> AbstractContextManager[Any]:
        return Live(console=console, refresh_per_second=2, get_renderable=lambda: live_table(plan, statuses))

    return view
