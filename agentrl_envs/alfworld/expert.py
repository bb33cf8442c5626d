"""The expert: the planner's plan from the current state, kept until the agent leaves it.

ALFWorld ships a hand-written expert, but it loops on pick-two tasks; the Fast Downward planner
inside TextWorld solves every game. Asking the planner on every turn would cost tens of
milliseconds per turn, so :class:`PlanFollower` keeps the last plan and only asks again when
the agent did something else than the plan's next command (a demonstration that injects random
actions, or an agent acting on its own). A command the game rejected changes nothing, so the
plan stays valid across it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

#: What the expert says when there is nothing left to do (the game is won, or no plan exists).
IDLE_COMMAND = "look"


class PlanFollower:
    """The next expert command from the current state of one episode.

    ``planner`` returns the planner's commands from the current game state to the goal (an
    empty list when the goal holds or no plan exists). Call :meth:`start` at reset (with the
    walkthrough when it is known to start from the initial state), :meth:`observe` after every
    step, and :meth:`next_command` whenever an expert move is wanted.
    """

    def __init__(self, planner: Callable[[], list[str]]):
        self._planner = planner
        self._plan: list[str] | None = None
        self.replans = 0  # how many times the planner was asked (tests and benchmarks read it)

    def start(self, walkthrough: Sequence[str] | None = None) -> None:
        self._plan = list(walkthrough) if walkthrough else None

    def observe(self, command: str, accepted: bool) -> None:
        """Record a step: ``accepted`` is False when the game rejected the command."""
        if not accepted or self._plan is None:
            return
        if self._plan and self._plan[0] == command:
            self._plan.pop(0)
        else:
            self._plan = None  # the agent left the plan: replan on the next request

    def next_command(self) -> str:
        if not self._plan:
            self._plan = list(self._planner())
            self.replans += 1
        return self._plan[0] if self._plan else IDLE_COMMAND

    @property
    def remaining(self) -> list[str] | None:
        """The plan still to run, if one is current (None after a deviation)."""
        return list(self._plan) if self._plan is not None else None
