"""Expert demonstrations, recorded exactly as the rollout engine would prompt them.

``agentrl demos`` plays an env's expert (``expert_action()`` on the unwrapped env) and writes one
JSON line per turn: the chat messages and the rendered prompt built by the same
:class:`~agentrl.prompting.PromptBuilder` as rollouts (same system prompt, history window,
chat template), and the reply written in the same action format. A supervised warm start on
these (``agentrl sft``) then teaches the model exactly the input/output it sees in RL.

``noise`` replaces a share of the expert's moves by random admissible ones, so the model also
sees states where it has to recover; those turns are marked ``"expert": false`` and SFT skips
them by default (their effect on later prompts stays).

The same JSONL format is accepted from users: the fields SFT needs are ``messages`` (or
``prompt``) and ``reply``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentrl.envs import expert_action
from agentrl.errors import UserError
from agentrl.prompting import HistoryEntry, PromptBuilder


@dataclass
class DemoTurn:
    env: str
    split: str | None
    task_seed: int
    turn: int
    task: str
    task_type: str | None
    messages: list[dict[str, str]]
    prompt: str
    reply: str
    action: str
    expert: bool
    admissible: list[str] | None
    reward: float
    episode_won: bool = False

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def play_expert_episode(env: gym.Env, builder: PromptBuilder, seed: int, noise: float,
                        rng: random.Random, env_name: str, split: str | None,
                        max_turns: int | None = None) -> list[DemoTurn]:
    """One episode of the expert (with noise), as demo turns."""
    obs, info = env.reset(seed=seed)
    history: list[HistoryEntry] = []
    turns: list[DemoTurn] = []
    task, task_type = info["task"], info.get("task_type")
    while True:
        step = len(turns) + 1
        admissible = info.get("admissible_actions")
        prompt = builder.build(task, history, obs, admissible, step)
        is_expert = not (admissible and noise > 0 and rng.random() < noise)
        action = expert_action(env) if is_expert else rng.choice(admissible)
        reply = builder.action_format.render(action)
        next_obs, reward, terminated, truncated, info = env.step(action)
        turns.append(DemoTurn(env_name, split, seed, step, task, task_type, prompt.messages, prompt.text,
                              reply, action, is_expert, list(admissible) if admissible else None,
                              float(reward)))
        history.append(HistoryEntry(obs, action))
        obs = next_obs
        if terminated or truncated or (max_turns is not None and step >= max_turns):
            won = bool(info.get("won", False))
            for t in turns:
                t.episode_won = won
            return turns


def record_demos(make: Callable[[], gym.Env], builder: PromptBuilder, episodes: int, output: Path,
                 env_name: str, split: str | None, noise: float = 0.0, seed: int = 0,
                 first_task_seed: int = 0, max_turns: int | None = None) -> dict[str, float]:
    """Write ``episodes`` expert episodes to ``output`` (JSONL); return summary numbers."""
    if not 0.0 <= noise < 1.0:
        raise UserError(f"--expert-noise must be in [0, 1), not {noise}.")
    rng = random.Random(seed)
    env = make()
    wins = turns_written = 0
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        with output.open("w") as fh:
            for k in range(episodes):
                episode = play_expert_episode(env, builder, first_task_seed + k, noise, rng,
                                              env_name, split, max_turns)
                wins += episode[-1].episode_won
                for turn in episode:
                    fh.write(json.dumps(turn.to_json()) + "\n")
                turns_written += len(episode)
    finally:
        env.close()
    return {"episodes": float(episodes), "turns": float(turns_written), "expert_success": wins / max(1, episodes)}


def read_demos(path: Path) -> Iterator[dict[str, Any]]:
    """Demo turns from a JSONL file, checked for the fields SFT needs."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise UserError(f"Cannot read demonstrations '{path}': {exc.strerror or exc}.") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{number} is not valid JSON ({exc.msg}).") from exc
        if "reply" not in record or not ("messages" in record or "prompt" in record):
            raise UserError(f"{path}:{number} lacks 'reply' and 'messages' (or 'prompt').")
        yield record
