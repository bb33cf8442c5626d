"""``agentrl/ALFWorld-v0``: ALFWorld's household tasks as a Gymnasium text env.

The game runs on TextWorld's PDDL engine with ALFWorld's domain, grammar and wrappers (see
``engine.py``), so observations and admissible commands read exactly as in ALFWorld. Games
come from ALFWorld's official files when they are present where alfworld looks (``data_path=``,
``$ALFWORLD_DATA``, alfworld's default ``~/.cache/alfworld``) and are generated otherwise
(``generator.py``); a data location that is given but holds no games is an error, never a silent
switch to generated games. ``protocol="paper"`` fixes the published evaluation setup
(``protocol.py``). ``data_fingerprint()`` says which games a run played.

Usage::

    env = gymnasium.make("agentrl/ALFWorld-v0", split="train", scene="small", max_steps=30)
    obs, info = env.reset(seed=3)  # game 3 of the train split, the same on every machine
    obs, reward, terminated, truncated, info = env.step(info["admissible_actions"][0])
    env.unwrapped.expert_action()  # the planner's next command from the current state
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentrl.envs import text_space
from agentrl.errors import UserError

from ..action_check import action_problem
from . import generator, official
from . import protocol as protocols
from .catalog import TASK_TYPES
from .expert import IDLE_COMMAND, PlanFollower

SYSTEM_PROMPT = (
    "You are a household helper working in a home that you perceive only through text. "
    "Rooms contain numbered furniture and appliances (countertop 1, drawer 2, fridge 1) that "
    "hold numbered objects (apple 1, mug 2). You see what a receptacle holds only when you go "
    "to it, and a closed one must be opened first. You can carry one object at a time: take "
    "it from where it lies and move it to another receptacle. Clean things with a sinkbasin, "
    "heat them with a microwave, cool them with a fridge, and use a lamp to look at something "
    "under its light. Each turn, pick exactly one of the admissible actions, written exactly "
    "as listed, and finish the task in as few steps as you can."
)

SOURCES = ("auto", "generated", "official")
#: What the game says to a command it cannot carry out (TextWorld's wording), also the answer
#: to an action that is not text or is too long to be a command.
NOTHING_HAPPENS = "Nothing happens."
_SPACES = re.compile(r"\s+")


@dataclass
class _Game:
    """The game being played: its tw-pddl dict and what the agent is told about it."""

    key: str  # "generated/train/17" or the official file path
    data: dict[str, Any]
    task: str
    task_type: str
    walkthrough: list[str] | None  # planner commands from the initial state, when known
    object_type: str = ""  # the goal's object and receptacle (or lamp) types, when generated
    target_type: str = ""


class ALFWorldEnv(gym.Env):
    """ALFWorld household tasks: reward ``success_reward`` when the goal holds, else 0.

    Args:
        split: ``train``, ``eval_seen`` or ``eval_unseen`` (ALFWorld's train, valid_seen and
            valid_unseen for official files).
        max_steps: episode length limit; reaching it truncates (50, as in the paper's setup).
        success_reward: reward of the winning step; ``metadata["r_max"]`` follows it.
        scene: knob preset for generated games, ``default`` (11-16 receptacles, 6-12
            distractors) or ``small`` (4-6 receptacles, 2-4 distractors).
        receptacles, distractors: override the preset, an int or an inclusive (min, max).
        closed_prob: chance an openable receptacle starts closed (ALFWorld: 1.0).
        task_types: restrict generated (or official) games to these of the six types.
        source: ``auto`` (official files if found, else generated), ``generated``, ``official``.
        data_path: folder with the official files (default ``$ALFWORLD_DATA``, else alfworld's
            ``~/.cache/alfworld``); given but without games it is an error.
        protocol: ``default`` or ``paper`` (official data required, ``help`` hidden, commands
            judged after normalisation, only malformed replies invalid; ``protocol.py``).
        num_games: make the split finite: seed ``s`` plays game ``s % num_games``.
        hide_commands: verbs left out of ``info["admissible_actions"]`` (e.g. ``("examine",
            "look", "inventory", "help")``: a small model otherwise keeps examining things);
            the game still accepts them when typed. Default: ALFWorld's full list.
    """

    metadata: dict[str, Any] = {
        "render_modes": ["ansi"],
        "r_max": 10.0,
        "system_prompt": SYSTEM_PROMPT,
    }

    def __init__(
        self,
        split: str = "train",
        max_steps: int = 50,
        success_reward: float = 10.0,
        scene: str = "default",
        receptacles: int | tuple[int, int] | None = None,
        distractors: int | tuple[int, int] | None = None,
        closed_prob: float | None = None,
        task_types: str | tuple[str, ...] | list[str] | None = None,
        source: str = "auto",
        data_path: str | os.PathLike[str] | None = None,
        num_games: int | None = None,
        hide_commands: str | tuple[str, ...] | list[str] = (),
        protocol: str = "default",
        render_mode: str | None = None,
    ):
        for module in ("textworld", "alfworld", "fast_downward"):
            if importlib.util.find_spec(module) is None:
                raise UserError(
                    "The ALFWorld env needs the alfworld extra: pip install 'agentrl[alfworld]' "
                    f"(module {module} is missing)."
                )
        if split not in generator.SPLITS:
            raise UserError(
                f"Unknown ALFWorld split '{split}'; choose one of {list(generator.SPLITS)}."
            )
        if source not in SOURCES:
            raise UserError(f"Unknown ALFWorld source '{source}'; choose one of {list(SOURCES)}.")
        if max_steps < 1:
            raise UserError(f"ALFWorld max_steps must be at least 1, not {max_steps}.")
        if success_reward <= 0:
            raise UserError(f"ALFWorld success_reward must be positive, not {success_reward}.")
        if num_games is not None and num_games < 1:
            raise UserError(f"ALFWorld num_games must be at least 1, not {num_games}.")
        if protocol not in protocols.PROTOCOLS:
            raise UserError(
                f"Unknown ALFWorld protocol '{protocol}'; choose one of {list(protocols.PROTOCOLS)}."
            )
        if source == "generated" and data_path is not None:
            raise UserError("ALFWorld data_path names official games, which source='generated' never "
                            "reads; drop one of the two.")
        if protocol == "paper":
            if source == "generated":
                raise UserError("ALFWorld protocol 'paper' plays the official games; drop "
                                "source='generated' (or use protocol 'default').")
            if max_steps != protocols.PAPER_MAX_STEPS:
                raise UserError(f"ALFWorld protocol 'paper' plays {protocols.PAPER_MAX_STEPS} "
                                f"steps per episode, not max_steps={max_steps}.")
            source = "official"
            hide_commands = tuple(
                {*((hide_commands,) if isinstance(hide_commands, str) else hide_commands),
                 *protocols.PAPER_HIDDEN}
            )
        self.protocol = protocol
        self.split = split
        self.max_steps = max_steps
        self.success_reward = float(success_reward)
        self.num_games = num_games
        self.hide_commands = frozenset(
            (hide_commands,) if isinstance(hide_commands, str) else hide_commands
        )
        self.render_mode = render_mode
        self.config = generator.resolve_config(
            scene, receptacles=receptacles, distractors=distractors, closed_prob=closed_prob,
            task_types=task_types,
        )
        self.metadata = {**type(self).metadata, "r_max": self.success_reward,
                         "invalid_action_rule": protocols.INVALID_RULE[protocol]}
        if protocol == "paper":  # the rollout judges admissibility as the game matches commands
            self.metadata["normalize_action"] = protocols.normalize_command
        self.observation_space = text_space(16384)
        self.action_space = text_space(512)

        self._scene_knobs = {
            name: value for name, value in (
                ("scene", None if scene == "default" else scene), ("receptacles", receptacles),
                ("distractors", distractors), ("closed_prob", closed_prob),
            ) if value is not None
        }
        self._data: official.DataRoot | None = None
        self._official: tuple[official.OfficialGame, ...] = ()
        if source != "generated":
            self._data = official.locate(data_path)
        if self._data is None and source == "official":
            raise UserError(
                f"ALFWorld needs its official games{' (protocol paper)' if protocol == 'paper' else ''} "
                f"but none were found (ALFWORLD_DATA unset, ~/.cache/alfworld empty); "
                f"{official.HOW_TO_GET}."
            )
        if self._data is not None:
            self._official = self._index_official(split)
        self.source = "official" if self._data is not None else "generated"

        self._tw: Any = None  # the TextWorld env, made on first reset (it loads a 30 MB library)
        self._expert: PlanFollower | None = None
        self._accepted: OrderedDict[int, _Game] = OrderedDict()  # game index -> checked game
        self._game: _Game | None = None
        self._loaded_key: str | None = None
        self._state: Any = None
        self._steps = 0
        self._won = False
        self._last_obs = ""

    # --- contract ---------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        index = seed if seed is not None else int(self.np_random.integers(2**31 - 1))
        if index < 0:
            raise UserError(f"ALFWorld seeds select games and must be >= 0, not {index}.")
        if self.num_games is not None:
            index %= self.num_games
        self._ensure_engine()
        game = self._accepted.get(index)
        if game is None:
            if self.source == "official":
                game = self._find_official(index)
            else:
                game = self._generate(index)
            self._accepted[index] = game
            while len(self._accepted) > 256:
                self._accepted.popitem(last=False)
        elif self._loaded_key != game.key:
            self._load(game)
            self._state = self._tw.reset()
        else:
            self._state = self._tw.reset()
        self._game = game
        assert self._expert is not None
        self._expert.start(game.walkthrough)
        self._steps = 0
        self._won = False
        self._last_obs = self._state.feedback
        return self._last_obs, self._info()

    def step(self, action: str):
        if self._game is None:
            raise RuntimeError("call reset() before step()")
        assert self._expert is not None
        if action_problem(action, self.action_space.max_length) is not None:
            # Not a command the parser could ever accept (None, bytes, lone surrogates, or
            # longer than any command): answered like any rejected command, without parsing it,
            # which for megabytes of text would take seconds.
            return self._refuse()
        command = _SPACES.sub(" ", action).strip().lower()
        accepted = command in self._state["admissible_commands"]
        self._state, _, _ = self._tw.step(command)
        self._steps += 1
        self._expert.observe(command, accepted)
        won = bool(self._state["won"])
        reward = self.success_reward if won and not self._won else 0.0
        self._won = self._won or won
        terminated = self._won
        truncated = not terminated and self._steps >= self.max_steps
        self._last_obs = self._state.feedback
        return self._last_obs, reward, terminated, truncated, self._info()

    def render(self) -> str | None:
        return self._last_obs if self.render_mode == "ansi" else None

    def _refuse(self):
        """A step that changes nothing: the game's answer to a command it cannot carry out."""
        self._steps += 1
        assert self._expert is not None
        self._expert.observe("", False)  # a rejected command: the expert keeps its plan
        truncated = not self._won and self._steps >= self.max_steps
        self._last_obs = NOTHING_HAPPENS
        return self._last_obs, 0.0, self._won, truncated, self._info()

    def close(self) -> None:
        if self._tw is not None:  # its planner library is kept for the next env to use
            from .engine import release_textworld_env

            release_textworld_env(self._tw)
        self._tw = None
        self._game = None
        self._loaded_key = None
        self._accepted.clear()
        super().close()

    # --- expert ------------------------------------------------------------------------------
    def expert_action(self) -> str:
        """The planner's next command from the current state (``look`` once the game is won)."""
        if self._game is None or self._expert is None:
            raise RuntimeError("call reset() before expert_action()")
        if self._won:
            return IDLE_COMMAND
        return self._expert.next_command()

    def expert_plan(self) -> list[str]:
        """The expert's commands from the current state to the goal ([] once won)."""
        if self._won:
            return []
        self.expert_action()  # makes sure a plan from the current state is held
        assert self._expert is not None and self._expert.remaining is not None
        return self._expert.remaining

    @property
    def walkthrough(self) -> list[str]:
        """The planner's solution from the current game's initial state."""
        if self._game is None:
            raise RuntimeError("call reset() first")
        if self._game.walkthrough is None:
            if self._steps:  # replan from the start without disturbing the episode
                raise RuntimeError("the walkthrough of an official game is known after reset only")
            self._game.walkthrough = self._tw.plan()
        return list(self._game.walkthrough)

    def game_data(self) -> dict[str, Any]:
        """The current game as a ``game.tw-pddl`` dict (with its walkthrough when known)."""
        if self._game is None:
            raise RuntimeError("call reset() first")
        if not self._game.data:  # official games are read from their file when needed
            return official.read_game(Path(self._game.key))
        return dict(self._game.data)

    @property
    def game_info(self) -> dict[str, str]:
        """The current game's id, task type, goal sentence and goal object/target types."""
        if self._game is None:
            raise RuntimeError("call reset() first")
        g = self._game
        return {"game": g.key, "task_type": g.task_type, "task": g.task,
                "object_type": g.object_type, "target_type": g.target_type}

    # --- internals -------------------------------------------------------------------------
    def _ensure_engine(self) -> None:
        if self._tw is None:
            from .engine import make_textworld_env

            self._tw = make_textworld_env()
            self._expert = PlanFollower(self._tw.plan)

    def _load(self, game: _Game) -> None:
        self._tw.load(game.data if game.key.startswith("generated/") else game.key)
        self._loaded_key = game.key

    def _generate(self, index: int) -> _Game:
        """The first candidate for this index that is not won at the start and has a plan."""
        for spec in generator.iter_candidates(self.split, index, self.config):
            data = spec.game_data()
            game = _Game(
                f"generated/{self.split}/{index}", data, spec.goal, spec.task_type, None,
                spec.object_type, spec.target_type,
            )
            self._load(game)
            self._state = self._tw.reset()
            if self._state["won"]:
                continue
            plan = self._tw.plan()  # from the initial state: the game's walkthrough
            if not plan:
                continue
            data["solvable"], data["walkthrough"] = True, plan
            game.walkthrough = list(plan)
            return game
        raise AssertionError("iter_candidates ends by raising")  # pragma: no cover

    def _index_official(self, split: str) -> tuple[official.OfficialGame, ...]:
        """The split's official games, or one sentence on why they cannot be played as asked."""
        assert self._data is not None
        where = f"{self._data.root} (from {self._data.origin})"
        if self._scene_knobs:
            knobs = ", ".join(f"{k}={v!r}" for k, v in self._scene_knobs.items())
            raise UserError(
                f"ALFWorld scene knobs ({knobs}) shape generated games, but official games were "
                f"found under {where}; drop the knobs, or pass source='generated' to play "
                f"generated games."
            )
        folder = self._data.root / official.SPLIT_DIRS[split]
        if not folder.is_dir():
            raise UserError(
                f"ALFWorld official data under {where} has no '{folder.name}' folder for split "
                f"'{split}'; refusing to mix official and generated games (download every split "
                f"with alfworld-download, or pass source='generated')."
            )
        wanted = set(self.config.task_types)
        games = tuple(g for g in official.list_games(self._data.root, split) if g.task_type in wanted)
        if not games:
            raise UserError(
                f"No playable official ALFWorld games of split '{split}' under {folder} (none "
                f"with traj_data.json, a wanted task type and \"solvable\": true)."
            )
        return games

    def _find_official(self, index: int) -> _Game:
        """Official game ``index`` (mod the split size): seed ``i`` plays entry ``i`` of the index,
        which holds only games alfworld itself would play (nothing is skipped at load time)."""
        entry = self._official[index % len(self._official)]
        game = _Game(str(entry.path), {}, "", entry.task_type, None)
        self._tw.load(official.read_game(entry.path))
        self._loaded_key = game.key
        self._state = self._tw.reset()
        game.task = official.task_sentence(self._state.feedback)
        return game

    # --- what was played ---------------------------------------------------------------------
    def normalize_action(self, action: str) -> str:
        """The command as the game matches it (lower case, single spaces)."""
        return protocols.normalize_command(action)

    def data_fingerprint(self) -> dict[str, Any]:
        """Which games this env plays, for run directories, evals and reports
        (:mod:`agentrl.rundir.fingerprint`): source, split, split size, a digest of the ordered game
        list, the options that change the games or the scoring, the library versions.

        Official games: the digest is over the game paths inside the split folder, so the same
        download gives the same digest anywhere. Generated games: the split is unbounded (or
        ``num_games``), and the digest covers the generator's knobs and the source of the
        generator and catalog modules, which is what determines game ``i``.
        """
        folder = official.SPLIT_DIRS[self.split]
        options: dict[str, Any] = {
            "max_steps": self.max_steps, "success_reward": self.success_reward,
            "num_games": self.num_games, "hide_commands": sorted(self.hide_commands),
            "task_types": list(self.config.task_types), "protocol": self.protocol,
        }
        out: dict[str, Any] = {
            "source": self.source,
            "split": f"{self.split} ({folder})",
            "protocol": self.protocol,
            "reward": f"{self.success_reward:g} on success, else 0",
            "invalid_action_rule": self.metadata["invalid_action_rule"],
            "versions": {name: _version(name) for name in ("alfworld", "textworld")},
        }
        if self.source == "official":
            assert self._data is not None
            out["split_size"] = len(self._official) if self.num_games is None else min(
                self.num_games, len(self._official))
            out["games_sha256"] = official.games_digest(self._data.root, self.split, self._official)
            out["data_version"] = self._data.root.name
            out["local"] = {"data_root": str(self._data.root), "found_via": self._data.origin}
            exported = sum(g.path.parent.name.startswith(official.EXPORT_PREFIX)
                           for g in self._official)
            if exported:  # files in ALFWorld's layout, but games agentrl generated (export.py)
                out["comparability"] = (
                    f"{exported} of {len(self._official)} games were generated by agentrl and "
                    f"exported: not comparable to published ALFWorld numbers")
        else:
            knobs = {
                "receptacles": list(self.config.receptacles),
                "distractors": list(self.config.distractors),
                "closed_prob": self.config.closed_prob,
            }
            options.update(knobs)
            out["split_size"] = self.num_games  # None: unbounded, seed s is game s
            out["games_sha256"] = _generator_digest(self.split, options)
            out["comparability"] = (
                "generated games: not comparable to published ALFWorld numbers")
        out["options"] = options
        return out

    def _info(self) -> dict[str, Any]:
        assert self._game is not None
        return {
            "task": self._game.task,
            "task_type": self._game.task_type,
            "admissible_actions": [
                c for c in self._state["admissible_commands"]
                if c.split(" ", 1)[0] not in self.hide_commands
            ],
            "won": self._won,
            "score": 1.0 if self._won else 0.0,
            "game": self._game.key,
            "steps": self._steps,
        }


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _generator_digest(split: str, options: dict[str, Any]) -> str:
    """SHA-256 of what decides generated game ``i``: the split, the knobs, and the source text
    of the generator and its tables (a change to either changes the games)."""
    digest = hashlib.sha256(f"{split}|{sorted(options.items())!r}".encode())
    from . import catalog

    for module in (generator, catalog):
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()


__all__ = ["ALFWorldEnv", "SYSTEM_PROMPT", "TASK_TYPES"]
