"""Expert demonstrations, recorded exactly as the rollout engine would prompt them.

``agentrl demos`` plays an env's expert (``expert_action()`` on the unwrapped env) and writes one
JSON line per turn: the chat messages and the rendered prompt built by the same
:class:`~agentrl.rollout.prompting.PromptBuilder` as rollouts (same system prompt, history window,
chat template), and the reply written in the same action format. A supervised warm start on
these (``agentrl sft``) then teaches the model exactly the input/output it sees in RL.

``noise`` replaces a share of the expert's moves by random admissible ones, so the model also
sees states where it has to recover; those turns are marked ``"expert": false`` and SFT skips
them by default (their effect on later prompts stays).

The same JSONL format is accepted from users: the fields SFT needs are ``messages`` (or
``prompt``) and ``reply``.

With ``rollout.history: conversation`` the prompts are those of the growing chat
(:mod:`agentrl.rollout.conversation`): each record's ``messages`` are the whole conversation so far, so a
warm start teaches the format the RL run will prompt with. The episode stops where the next
prompt would pass ``max_prompt_tokens``, as a rollout does.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentrl.envs.contract import expert_action
from agentrl.errors import UserError, shown
from agentrl.rollout.conversation import ConversationBuilder
from agentrl.rollout.prompting import HistoryEntry, PromptBuilder


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
                        max_turns: int | None = None,
                        conversation: ConversationBuilder | None = None) -> list[DemoTurn]:
    """One episode of the expert (with noise), as demo turns (``conversation``: prompted as
    one growing chat)."""
    obs, info = env.reset(seed=seed)
    history: list[HistoryEntry] = []
    turns: list[DemoTurn] = []
    task, task_type = info["task"], info.get("task_type")
    chat = conversation.first(task, obs, info.get("admissible_actions")) if conversation is not None else None
    while True:
        step = len(turns) + 1
        admissible = info.get("admissible_actions")
        prompt = chat if chat is not None else builder.build(task, history, obs, admissible, step)
        is_expert = not (admissible and noise > 0 and rng.random() < noise)
        action = expert_action(env) if is_expert else rng.choice(admissible)
        reply = builder.action_format.render(action)
        next_obs, reward, terminated, truncated, info = env.step(action)
        turns.append(DemoTurn(env_name, split, seed, step, task, task_type, prompt.messages, prompt.text,
                              reply, action, is_expert, list(admissible) if admissible else None,
                              float(reward)))
        history.append(HistoryEntry(obs, action))
        obs = next_obs
        over_limit = False
        if conversation is not None and not (terminated or truncated):
            reply_ids = builder.encode(reply) + [conversation.delta.end_of_turn]
            chat = conversation.extend(prompt, reply_ids, reply, obs, info.get("admissible_actions"), step + 1)
            over_limit = not conversation.fits(chat)
        if terminated or truncated or over_limit or (max_turns is not None and step >= max_turns):
            won = bool(info.get("won", False))
            for t in turns:
                t.episode_won = won
            return turns


def record_demos(make: Callable[[], gym.Env], builder: PromptBuilder, episodes: int, output: Path,
                 env_name: str, split: str | None, noise: float = 0.0, seed: int = 0,
                 first_task_seed: int = 0, max_turns: int | None = None,
                 conversation: ConversationBuilder | None = None) -> dict[str, float]:
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
                                              env_name, split, max_turns, conversation)
                wins += episode[-1].episode_won
                for turn in episode:
                    fh.write(json.dumps(turn.to_json()) + "\n")
                turns_written += len(episode)
    finally:
        env.close()
    return {"episodes": float(episodes), "turns": float(turns_written), "expert_success": wins / max(1, episodes)}


def read_demos(path: Path) -> Iterator[dict[str, Any]]:
    """Demo turns from a JSONL file, each checked for the fields SFT reads and their types.

    A file that is not UTF-8 text, a line that is not a JSON object, or a field of the wrong
    type is reported as one sentence with the file and line number, before any model is loaded
    (the caller reads every file first).
    """
    try:
        raw = path.read_bytes()
    except IsADirectoryError as exc:
        raise UserError(f"Demonstrations '{path}' is a folder; pass a JSONL file.") from exc
    except OSError as exc:
        raise UserError(f"Cannot read demonstrations '{path}': {exc.strerror or exc}.") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise UserError(f"{path}:{line} is not UTF-8 text (is it a binary file?); demonstrations are JSONL.") from exc
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise UserError(f"{path}:{line} holds a NUL byte (is it a binary file?); demonstrations are JSONL.")
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{number} is not valid JSON ({exc.msg}).") from exc
        check_demo_record(record, f"{path}:{number}")
        yield record


#: Roles a chat template knows.
CHAT_ROLES = ("system", "user", "assistant", "tool")
#: The most characters of prompt and reply in one demonstration turn: about 64k tokens, more than
#: any rollout prompt; a larger turn is a mistake that would take minutes to tokenize and OOM the
#: training step rather than teach anything.
MAX_DEMO_CHARS = 256_000


def check_demo_record(record: Any, where: str) -> None:
    """Raise :class:`UserError` unless ``record`` is a demo turn SFT can use."""
    if not isinstance(record, dict):
        raise UserError(f"{where} must be a JSON object with 'reply' and 'messages' (or 'prompt'), "
                        f"not {type(record).__name__ if record is not None else 'null'}.")
    if "reply" not in record or not ("messages" in record or "prompt" in record):
        raise UserError(f"{where} lacks 'reply' and 'messages' (or 'prompt').")
    if not isinstance(record["reply"], str) or not record["reply"]:
        raise UserError(f"{where}: 'reply' must be a non-empty string, not {shown(record['reply'])}.")
    if not record["reply"].strip():
        raise UserError(f"{where}: 'reply' holds only whitespace; a demonstration teaches the reply it holds.")
    if "messages" in record:
        messages = record["messages"]
        if not isinstance(messages, list) or not messages:
            raise UserError(f"{where}: 'messages' must be a non-empty list of {{role, content}} objects.")
        for k, message in enumerate(messages):
            if not (isinstance(message, dict) and isinstance(message.get("role"), str)
                    and isinstance(message.get("content"), str)):
                raise UserError(f"{where}: messages[{k}] must be an object with string 'role' and 'content'.")
            if message["role"] not in CHAT_ROLES:
                raise UserError(f"{where}: messages[{k}] has role {shown(message['role'], 60)}; "
                                f"roles are {', '.join(CHAT_ROLES)}.")
    elif not isinstance(record["prompt"], str):
        raise UserError(f"{where}: 'prompt' must be a string, not {type(record['prompt']).__name__}.")
    if "expert" in record and not isinstance(record["expert"], bool):
        raise UserError(f"{where}: 'expert' must be true or false, not {shown(record['expert'])}.")
    size = (sum(len(m["content"]) for m in record["messages"]) if "messages" in record else len(record["prompt"]))
    if size + len(record["reply"]) > MAX_DEMO_CHARS:
        raise UserError(f"{where} holds {size + len(record['reply']):,} characters of prompt and reply, more than the "
                        f"{MAX_DEMO_CHARS:,} a demonstration turn may hold (a rollout prompt is at most "
                        f"rollout.max_prompt_tokens tokens).")


def check_demo_files(paths: list[Path]) -> int:
    """Read and check every demo file (one sentence on the first bad line); return the turn count.

    ``agentrl sft`` calls this before its progress display and before any model loads.
    """
    turns = sum(1 for path in paths for _ in read_demos(Path(path)))
    if turns == 0:
        raise UserError(f"The demonstration files ({', '.join(map(str, paths))}) hold no turns.")
    return turns
