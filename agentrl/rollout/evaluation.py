"""Episode statistics, shared by training logs, ``agentrl eval`` and reports.

Success is the env's ``won``; ``score`` is the env's own score where it has one (WebShop's raw
reward), else 1/0 for won/lost. Per-task-type success (ALFWorld's six types) is reported under
``<prefix>/success/<task_type>``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from agentrl.rollout.engine import RolloutEngine, Task
from agentrl.rollout.trajectory import Trajectory


def episode_metrics(trajectories: Sequence[Trajectory], prefix: str) -> dict[str, float]:
    if not trajectories:
        return {}
    n = len(trajectories)
    turns = [t for traj in trajectories for t in traj.turns]
    out = {
        f"{prefix}/success_rate": sum(t.won for t in trajectories) / n,
        f"{prefix}/score": sum(t.score for t in trajectories) / n,
        f"{prefix}/return": sum(t.episode_return for t in trajectories) / n,
        f"{prefix}/episode_length": sum(len(t.turns) for t in trajectories) / n,
        f"{prefix}/invalid_action_rate": (sum(not t.valid for t in turns) / len(turns)) if turns else 0.0,
        f"{prefix}/truncated_rate": sum(t.truncated for t in trajectories) / n,
        f"{prefix}/episodes": float(n),
    }
    by_type: dict[str, list[bool]] = defaultdict(list)
    for traj in trajectories:
        if traj.task_type:
            by_type[traj.task_type].append(traj.won)
    for task_type, wins in sorted(by_type.items()):
        out[f"{prefix}/success/{task_type}"] = sum(wins) / len(wins)
        out[f"{prefix}/episodes/{task_type}"] = float(len(wins))
    return out


def evaluate(engine: RolloutEngine, episodes: int, greedy: bool = True,
             first_seed: int = 0, version: int = 0) -> list[Trajectory]:
    """Play ``episodes`` eval tasks with seeds ``first_seed, first_seed + 1, ...`` (fixed, so every
    algorithm and every checkpoint is evaluated on the same tasks). Each episode records
    ``version`` as its ``policy_version``: the updates the evaluated weights had made (the
    trainer's iteration; 0 for weights evaluated as given, ``agentrl eval``)."""
    tasks = [Task(seed=first_seed + i, group=i) for i in range(episodes)]
    trajectories = engine.run(tasks, engine.config.sampling(greedy=greedy)).trajectories
    for traj in trajectories:
        traj.policy_version = version
    return trajectories
