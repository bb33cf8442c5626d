"""The rollout engine shared by every algorithm.

It runs one env per (task, rollout) pair turn by turn. At each turn the prompts of all live envs
go to the backend in one batched call; each reply is parsed, sent to its env, and recorded as a
:class:`~agentrl.rollout.trajectory.Turn`. An env that finishes leaves the batch at once, so later turns
do no work for it. An episode ends when the env terminates or truncates, or at ``max_turns``
(a truncation: the last state is bootstrapped, not treated as terminal).

``history: window`` (default, the paper's setting) builds every turn's prompt afresh
(:mod:`agentrl.rollout.prompting`); ``history: conversation`` grows one chat per episode, each prompt a
token-level extension of the last (:mod:`agentrl.rollout.conversation`), and ends the episode as truncated
when the next prompt would pass ``max_prompt_tokens``.

A reply without a well-formed action makes the env receive the empty action (which the contract
treats as a no-op); a well-formed but inadmissible action is passed to the env as written. Both
count as invalid: the turn's reward gets ``-invalid_action_penalty`` and the episode goes on.
Which turns are invalid is the env's to declare (:mod:`agentrl.rollout.action_validity`): by default
both of these; under ALFWorld's paper protocol only a malformed reply, with admissibility judged
on the env's normalised command.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym

from agentrl.backends.base import GenerationBackend, SamplingParams
from agentrl.envs.failures import (
    RAISED_KEY,
    EnvCallFailed,
    EnvStopped,
    error_outcome,
    replaced,
    report_env_error,
    stop_sentence,
)
from agentrl.envs.step_timeout import (
    DeadlineRunner,
    EnvStepTimeout,
    abandon,
    report_timeout,
    timed_out_outcome,
)
from agentrl.rollout.action_format import ActionFormat
from agentrl.rollout.action_validity import ActionValidity, pool_metadata
from agentrl.rollout.constrained import ConstraintBuilder
from agentrl.rollout.conversation import ConversationBuilder
from agentrl.rollout.prompting import HistoryEntry, Prompt, PromptBuilder
from agentrl.rollout.trajectory import Trajectory, Turn

INFO_KEYS_KEPT = ("won", "score", "task_type")


@dataclass
class RolloutConfig:
    """How episodes are played. ``tasks_per_iteration`` tasks x the algorithm's rollouts per task."""

    tasks_per_iteration: int = 8
    max_turns: int | None = None  # None: the env's own step limit
    history_window: int = 2  # window mode: (observation, action) pairs repeated in each prompt
    history: Literal["window", "conversation"] = "window"  # conversation: one growing chat per episode
    list_admissible: Literal["every", "first", "never"] = "every"  # conversation mode: which observation messages list the admissible actions
    kv_reuse: bool = True  # conversation mode, hf backend: keep each live episode's KV cache between turns
    action_mode: Literal["free", "constrained"] = "free"
    think: bool = False
    action_tag: str = "action"
    invalid_action_penalty: float = 0.1
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64
    max_prompt_tokens: int = 2048
    system_prompt: str | None = None
    backend: str = "auto"  # auto: vllm where installed (docs/scale.md), else hf
    generation_dtype: str = "auto"  # auto: bf16 copy for fp32 training on CPUs with native bf16 (build.generation_dtype); same; or a dtype
    generation_batch_size: int = 64
    env_workers: int = 0  # > 0: envs live in this many worker processes (agentrl.envs.workers)
    #: What an episode cut by the step limit (the env's, or ``max_turns``) means for the value
    #: targets. ``bootstrap``: a truncation, V(s_T) continues the return. ``terminal``: the
    #: episode ended for good (no reward can follow). ``auto``: terminal when the env declares
    #: ``metadata["time_limit_in_observation"] = True`` (the time left is part of the state,
    #: so the limit is part of the task: Pardo et al. 2018, "Time Limits in RL"), else bootstrap.
    #: A context-limit or hung-step end always bootstraps.
    time_limit: Literal["auto", "bootstrap", "terminal"] = "auto"
    env_step_timeout_s: float = 120.0  # a step hanging longer truncates its episode; 0: off (agentrl.envs.step_timeout)
    #: an exception in the env's reset/step: stop the run (resumable) or truncate that episode and
    #: replace the env (agentrl.envs.failures)
    env_errors: Literal["stop", "truncate"] = "stop"
    #: Asynchronous rollouts (agentrl.training.producer): > 0 plays iteration i+k's episodes, with
    #: the weights of iteration i's start, while the trainer updates on iteration i. Every
    #: episode is then exactly k updates stale when it is trained on. 0: the synchronous loop.
    max_staleness: int = 0

    def sampling(self, greedy: bool = False) -> SamplingParams:
        return SamplingParams(0.0 if greedy else self.temperature, self.top_p, self.max_new_tokens)


@dataclass(frozen=True)
class Task:
    seed: int
    group: int


@dataclass
class RolloutResult:
    trajectories: list[Trajectory]
    env_seconds: float = 0.0
    generate_seconds: float = 0.0
    prompt_seconds: float = 0.0
    generated_tokens: int = 0
    prompt_tokens: int = 0  # prompt tokens sent to the backend (what a cache-less backend prefills)
    #: prompt tokens that repeat the start of the episode's previous prompt + reply: what a prefix
    #: cache (vLLM's, block-granular) can skip; most of the prompt in conversation mode
    reusable_prompt_tokens: int = 0
    #: prompt tokens the backend really prefilled, where it counts them (hf: all prompt tokens,
    #: or only the new ones when it keeps episodes' KV between turns); None: it does not say
    prefilled_tokens: int | None = None
    turns: int = 0
    env_steps: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class EnvPool:
    """Envs stepped in this process. The pool grows to the largest number of slots asked for.

    ``step_timeout_s`` > 0: a step that hangs longer ends its episode as truncated and its env
    is replaced (:mod:`agentrl.envs.step_timeout`).
    """

    def __init__(self, factory: Callable[[], gym.Env], step_timeout_s: float = 0.0, env_errors: str = "stop"):
        self.factory = factory
        self.envs: list[gym.Env] = []
        self.step_timeout_s = step_timeout_s
        self.env_errors = env_errors  # rollout.env_errors: what an exception in reset/step means
        self._runner = DeadlineRunner()
        self._last: dict[int, tuple[Any, dict]] = {}  # slot -> last (obs, info), for a timeout

    def ensure(self, size: int) -> None:
        while len(self.envs) < size:
            self.envs.append(self.factory())

    def reset(self, slots: Sequence[int], seeds: Sequence[int]) -> list[tuple[str, dict]]:
        out = [self._reset(s, seed) for s, seed in zip(slots, seeds, strict=True)]
        self._last.update(zip(slots, out, strict=True))
        return out

    def _reset(self, slot: int, seed: int) -> tuple[str, dict]:
        """One reset; an exception is :class:`EnvCallFailed`, or under ``truncate`` one retry on a
        fresh env (agentrl.envs.failures)."""
        try:
            return self.envs[slot].reset(seed=seed)
        except Exception as exc:  # noqa: BLE001 (the user's env: any exception)
            if self.env_errors != "truncate":
                raise EnvCallFailed("reset", slot, exc) from exc
            report_env_error(slot, "reset", exc)
            self.envs[slot] = replaced(self.envs[slot], self.factory)
        try:
            return self.envs[slot].reset(seed=seed)
        except Exception as exc:  # noqa: BLE001
            raise EnvCallFailed("reset", slot, exc) from exc

    def step(self, slots: Sequence[int], actions: Sequence[str]) -> list[tuple]:
        return [self._step(s, a) for s, a in zip(slots, actions, strict=True)]

    def _step(self, slot: int, action: str) -> tuple:
        env = self.envs[slot]
        try:
            outcome = self._runner.call(lambda: env.step(action), self.step_timeout_s)
        except EnvStepTimeout:
            report_timeout(slot, action, self.step_timeout_s)
            abandon(env)
            self.envs[slot] = self.factory()
            obs, info = self._last.get(slot, ("", {}))
            return timed_out_outcome(obs, info, self.step_timeout_s)
        except Exception as exc:  # noqa: BLE001 (the user's env: any exception, agentrl.envs.failures)
            if self.env_errors != "truncate":
                raise EnvCallFailed("step", slot, exc) from exc
            report_env_error(slot, "step", exc)
            self.envs[slot] = replaced(env, self.factory)
            obs, info = self._last.get(slot, ("", {}))
            return error_outcome(obs, info, exc)
        self._last[slot] = (outcome[0], outcome[4])
        return outcome

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs.clear()


@dataclass
class _Slot:
    index: int
    trajectory: Trajectory
    observation: str
    info: dict[str, Any]
    history: list[HistoryEntry] = field(default_factory=list)
    prompt: Prompt | None = None  # conversation mode: the next turn's growing prompt
    last_sequence: list[int] = field(default_factory=list)  # the previous turn's prompt + reply


class RolloutEngine:
    def __init__(self, pool: EnvPool, backend: GenerationBackend, prompts: PromptBuilder,
                 action_format: ActionFormat, config: RolloutConfig,
                 constraints: ConstraintBuilder | None = None,
                 conversation: ConversationBuilder | None = None):
        self.pool = pool
        self.backend = backend
        self.prompts = prompts
        self.action_format = action_format
        self.config = config
        self.constraints = constraints
        metadata = pool_metadata(pool)
        self.validity = ActionValidity.from_metadata(metadata, action_format)
        self.time_limit_terminal = (config.time_limit == "terminal" or (
            config.time_limit == "auto" and bool(metadata.get("time_limit_in_observation", False))))
        if config.action_mode == "constrained" and constraints is None:
            raise ValueError("constrained action mode needs a ConstraintBuilder")
        self.conversation = conversation
        if config.history == "conversation" and conversation is None:
            raise ValueError("rollout.history=conversation needs a ConversationBuilder")

    def run(self, tasks: Sequence[Task], params: SamplingParams | None = None) -> RolloutResult:
        params = params or self.config.sampling()
        result = RolloutResult([])
        reuse = self._conversing and getattr(self.backend, "reuses_prefixes", False)
        if reuse:
            self.backend.drop_prefixes()  # KV of the last rollout belongs to the old weights
        prefilled_before = getattr(self.backend, "prefilled_tokens", None)
        self.pool.ensure(len(tasks))
        t0 = time.perf_counter()
        try:
            resets = self.pool.reset(range(len(tasks)), [t.seed for t in tasks])
        except EnvCallFailed as failure:
            raise EnvStopped(stop_sentence(self._env_id, failure, tasks[failure.slot].seed, 0)) from failure.error
        result.env_seconds += time.perf_counter() - t0
        live: list[_Slot] = []
        for i, (task, (obs, info)) in enumerate(zip(tasks, resets, strict=True)):
            traj = Trajectory(task_seed=task.seed, group=task.group, task=info["task"],
                              task_type=info.get("task_type"), conversation=self._conversing)
            result.trajectories.append(traj)
            slot = _Slot(i, traj, obs, info)
            if self._conversing:
                slot.prompt = self.conversation.first(traj.task, obs, info.get("admissible_actions"))
            live.append(slot)

        max_turns = self.config.max_turns
        while live:
            t0 = time.perf_counter()
            prompts = [self._prompt(slot) for slot in live]
            cursors = None
            if self.config.action_mode == "constrained":
                cursors = [self.constraints.cursor(slot.info["admissible_actions"])
                           if slot.info.get("admissible_actions") else None for slot in live]
            result.prompt_seconds += time.perf_counter() - t0
            result.prompt_tokens += sum(len(p.ids) for p in prompts)
            result.reusable_prompt_tokens += sum(common_prefix(slot.last_sequence, p.ids)
                                                 for slot, p in zip(live, prompts, strict=True))

            t0 = time.perf_counter()
            if reuse:  # the hf backend keeps each episode's KV between turns (agentrl.backends.prefix_store)
                gens = self.backend.generate([p.ids for p in prompts], params, cursors,
                                             keys=[slot.index for slot in live])
            else:
                gens = self.backend.generate([p.ids for p in prompts], params, cursors)
            result.generate_seconds += time.perf_counter() - t0
            result.generated_tokens += sum(len(g.token_ids) for g in gens)

            decoded = []
            for gen in gens:
                body = gen.token_ids[:-1] if gen.finished else gen.token_ids
                decoded.append(self.prompts.tokenizer.decode(body, skip_special_tokens=False))
            env_actions, valid = [], []
            for slot, reply in zip(live, decoded, strict=True):
                action = self.action_format.parse(reply)
                ok = self.validity.judge(reply, action, slot.info.get("admissible_actions"))
                env_actions.append(action if action is not None else "")
                valid.append(ok)

            t0 = time.perf_counter()
            try:
                outcomes = self.pool.step([s.index for s in live], env_actions)
            except EnvCallFailed as failure:
                failed = next(s for s in live if s.index == failure.slot)
                raise EnvStopped(stop_sentence(self._env_id, failure, failed.trajectory.task_seed,
                                               len(failed.trajectory.turns) + 1)) from failure.error
            result.env_seconds += time.perf_counter() - t0
            result.env_steps += len(live)

            still_live = []
            for slot, prompt, gen, reply, action, ok, outcome in zip(
                    live, prompts, gens, decoded, env_actions, valid, outcomes, strict=True):
                obs, env_reward, terminated, truncated, info = outcome
                if info.get(RAISED_KEY):  # rollout.env_errors=truncate: counted as rollout/env_errors
                    result.extra["env_errors"] = result.extra.get("env_errors", 0) + 1
                turn_number = len(slot.trajectory.turns) + 1
                if max_turns is not None and turn_number >= max_turns and not terminated:
                    truncated = True
                if truncated and not terminated and self.time_limit_terminal and "env_error" not in info:
                    terminated, truncated = True, False  # the step limit is part of the task
                following = None  # conversation mode: the next turn's prompt
                if self._conversing and not terminated:
                    following = self.conversation.extend(prompt, gen.token_ids, reply, obs,
                                                         info.get("admissible_actions"), turn_number + 1, ok)
                    if not self.conversation.fits(following):
                        truncated = True  # the context limit: end here, bootstrap from V(s_T)
                reward = float(env_reward) - (0.0 if ok else self.config.invalid_action_penalty)
                turn = Turn(
                    prompt_ids=prompt.ids, action_ids=list(gen.token_ids),
                    rollout_logprobs=list(gen.logprobs), prompt_text=prompt.text, reply_text=reply,
                    action=action, observation=slot.observation, reward=reward,
                    env_reward=float(env_reward), terminated=bool(terminated),
                    truncated=bool(truncated), valid=ok,
                    info={k: info[k] for k in INFO_KEYS_KEPT if k in info},
                    allowed=gen.allowed,
                )
                slot.trajectory.turns.append(turn)
                slot.last_sequence = list(prompt.ids) + list(gen.token_ids)
                result.turns += 1
                slot.history.append(HistoryEntry(slot.observation, action if ok else f"{action or reply[:80]} (invalid)"))
                slot.observation, slot.info = obs, info
                if terminated or truncated:
                    traj = slot.trajectory
                    traj.won = bool(info.get("won", False))
                    traj.score = float(info.get("score", 1.0 if traj.won else 0.0))
                    if not terminated:
                        traj.bootstrap_prompt_ids = following.ids if following is not None else self._prompt(slot).ids
                else:
                    slot.prompt = following
                    still_live.append(slot)
            live = still_live
        if reuse:
            self.backend.drop_prefixes()
        if prefilled_before is not None:
            result.prefilled_tokens = self.backend.prefilled_tokens - prefilled_before
        return result

    @property
    def _env_id(self) -> str:
        """The pool's env id, for a sentence about it (an EnvMaker knows it)."""
        return str(getattr(self.pool.factory, "env_id", None) or "the env")

    @property
    def _conversing(self) -> bool:
        return self.config.history == "conversation"

    def _prompt(self, slot: _Slot) -> Prompt:
        if self._conversing and slot.prompt is not None:
            return slot.prompt
        step = len(slot.trajectory.turns) + 1
        return self.prompts.build(slot.trajectory.task, slot.history, slot.observation,
                                  slot.info.get("admissible_actions"), step)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
