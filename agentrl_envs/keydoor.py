"""KeyDoor: the built-in text env for tests, demos and learning checks.

A small house of rooms joined by passages. A key lies in one room; a locked door stands in
another. The agent wins by taking the key and unlocking the door (sparse reward 1, only then).
The shortest solution takes 3 to 8 moves depending on the layout, and the task text names where
the key and the door are, so a policy can solve it from the observation alone.

Layouts are drawn from the reset seed: the same seed always gives the same house, key room,
door room and start room. ``n_rooms`` sets the difficulty (2 to 8). The ``eval`` split draws its
layouts from a disjoint seed range, so evaluation tasks are not the training seeds.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from agentrl.envs import text_space

from .action_check import action_problem

SPLIT_OFFSETS = {"train": 0, "eval": 1_000_000_007}
ROOM_NAMES = ("hall", "kitchen", "library", "study", "cellar", "attic", "pantry", "garden")
SYSTEM_PROMPT = (
    "You are an agent in a small text house. Move between rooms, pick up the key and unlock "
    "the locked door. Choose exactly one of the admissible actions each turn."
)


@dataclass(frozen=True)
class Layout:
    rooms: tuple[str, ...]
    edges: frozenset[tuple[str, str]]
    start: str
    key_room: str
    door_room: str

    def neighbours(self, room: str) -> list[str]:
        out = [b for a, b in self.edges if a == room] + [a for a, b in self.edges if b == room]
        return sorted(out)


def make_layout(seed: int, n_rooms: int) -> Layout:
    """A random tree of ``n_rooms`` rooms; key and door in different rooms when possible."""
    rng = random.Random(seed)
    rooms = tuple(rng.sample(ROOM_NAMES, n_rooms))
    edges = set()
    for i in range(1, n_rooms):
        parent = rooms[rng.randrange(i)]
        edges.add((parent, rooms[i]))
    start = rng.choice(rooms)
    key_room = rng.choice(rooms)
    door_candidates = [r for r in rooms if r != key_room] or list(rooms)
    door_room = rng.choice(door_candidates)
    return Layout(rooms, frozenset(edges), start, key_room, door_room)


def shortest_path(layout: Layout, src: str, dst: str) -> list[str]:
    """Rooms visited after ``src`` on the way to ``dst`` (breadth-first search)."""
    previous: dict[str, str | None] = {src: None}
    frontier = [src]
    while frontier:
        nxt = []
        for room in frontier:
            for n in layout.neighbours(room):
                if n not in previous:
                    previous[n] = room
                    nxt.append(n)
        frontier = nxt
    path = []
    node: str | None = dst
    while node is not None and node != src:
        path.append(node)
        node = previous[node]
    return path[::-1]


class KeyDoorEnv(gym.Env):
    """Find the key, then unlock the door. Reward 1 on success, 0 otherwise."""

    metadata = {"render_modes": ["ansi"], "r_max": 1.0, "system_prompt": SYSTEM_PROMPT}

    def __init__(self, n_rooms: int = 3, max_steps: int = 12, split: str = "train",
                 render_mode: str | None = None, step_latency_s: float = 0.0):
        """``step_latency_s``: each step sleeps this long first, standing for an env that answers
        over a network (a remote simulator, a browser, a tool): the asynchronous-rollout
        benchmark's knob (benchmarks/bench_async.py). 0: none."""
        if not 2 <= n_rooms <= len(ROOM_NAMES):
            raise ValueError(f"n_rooms must be between 2 and {len(ROOM_NAMES)}")
        if not 0 <= step_latency_s <= 60:
            raise ValueError("step_latency_s must be between 0 and 60 seconds")
        self.step_latency_s = float(step_latency_s)
        if split not in SPLIT_OFFSETS:
            raise ValueError(f"split must be one of {sorted(SPLIT_OFFSETS)}")
        self.split = split
        self.n_rooms = n_rooms
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.observation_space = text_space(4096)
        self.action_space = text_space(256)
        self._layout: Layout | None = None
        self._room = ""
        self._has_key = False
        self._steps = 0
        self._last_obs = ""

    # --- contract -------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        task_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        self._layout = make_layout(task_seed + SPLIT_OFFSETS[self.split], self.n_rooms)
        self._room = self._layout.start
        self._has_key = False
        self._steps = 0
        self._last_obs = self._describe()
        return self._last_obs, self._info(won=False)

    def step(self, action: str):
        assert self._layout is not None, "call reset() first"
        if self.step_latency_s:
            time.sleep(self.step_latency_s)
        self._steps += 1
        # Not text, too long or unencodable: no command, answered like any unknown one.
        problem = action_problem(action, self.action_space.max_length)
        command = "" if problem is not None else action.strip().lower()
        won = False
        if command not in self.admissible_actions():
            feedback = "Nothing happens."
        elif command.startswith("go to "):
            self._room = command[len("go to "):]
            feedback = ""
        elif command == "take key":
            self._has_key = True
            feedback = "You take the key."
        elif command == "unlock door":
            if self._has_key:
                won = True
                feedback = "You unlock the door with the key. It swings open: you are free!"
            else:
                feedback = "The door is locked. You need a key."
        else:  # look
            feedback = ""
        description = self._describe()
        self._last_obs = f"{feedback} {description}".strip() if not won else feedback
        terminated = won
        truncated = not terminated and self._steps >= self.max_steps
        return self._last_obs, (1.0 if won else 0.0), terminated, truncated, self._info(won=won)

    def render(self) -> str | None:
        return self._last_obs if self.render_mode == "ansi" else None

    # --- helpers -------------------------------------------------------------------------------
    @property
    def task(self) -> str:
        assert self._layout is not None
        return (f"find the key in the {self._layout.key_room} and unlock the door "
                f"in the {self._layout.door_room}.")

    def admissible_actions(self) -> list[str]:
        assert self._layout is not None
        actions = [f"go to {n}" for n in self._layout.neighbours(self._room)]
        if self._room == self._layout.key_room and not self._has_key:
            actions.append("take key")
        if self._room == self._layout.door_room:
            actions.append("unlock door")
        actions.append("look")
        return actions

    def data_fingerprint(self) -> dict[str, Any]:
        """What decides the tasks (agentrl.rundir.fingerprint): layouts are drawn from the seed plus the
        split's offset, with ``n_rooms`` rooms; the digest covers those and the layout code."""
        import hashlib
        import inspect

        code = inspect.getsource(make_layout).encode()
        key = f"{self.split}|{SPLIT_OFFSETS[self.split]}|{self.n_rooms}|".encode()
        return {
            "source": "generated", "split": self.split, "split_size": None,
            "games_sha256": hashlib.sha256(key + code).hexdigest(),
            "reward": "1 on unlocking the door, else 0",
            "options": {"n_rooms": self.n_rooms, "max_steps": self.max_steps},
        }

    def expert_action(self) -> str:
        """The shortest way to the key, then to the door, then unlock."""
        assert self._layout is not None
        target = self._layout.door_room if self._has_key else self._layout.key_room
        if self._room == target:
            return "unlock door" if self._has_key else "take key"
        return f"go to {shortest_path(self._layout, self._room, target)[0]}"

    def optimal_length(self) -> int:
        """Number of moves the expert needs from the start (for tests and docs)."""
        assert self._layout is not None
        lay = self._layout
        return (len(shortest_path(lay, lay.start, lay.key_room)) + 1
                + len(shortest_path(lay, lay.key_room, lay.door_room)) + 1)

    def _describe(self) -> str:
        assert self._layout is not None
        parts = [f"You are in the {self._room}."]
        if self._room == self._layout.key_room and not self._has_key:
            parts.append("A brass key lies on the floor.")
        if self._room == self._layout.door_room:
            parts.append("There is a locked door here.")
        parts.append("Passages lead to: " + ", ".join(self._layout.neighbours(self._room)) + ".")
        if self._has_key:
            parts.append("You carry the key.")
        return " ".join(parts)

    def _info(self, won: bool) -> dict[str, Any]:
        return {
            "task": self.task,
            "admissible_actions": None if won else self.admissible_actions(),
            "won": won,
            "score": 1.0 if won else 0.0,
        }
