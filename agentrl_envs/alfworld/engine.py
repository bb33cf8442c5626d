"""Play ``game.tw-pddl`` games on TextWorld's ``PddlEnv`` the way ALFWorld does, but faster.

ALFWorld plays its games with ``textworld.envs.PddlEnv`` wrapped by its ``AlfredDemangler``
(which names ``Tomato_bar_1`` "tomato 1") and ``AlfredInfos``. We keep exactly that stack, so
observations and admissible commands are ALFWorld's, and change what costs time
without changing any text:

* The grammar is parsed once per process (``PddlEnv`` parses it on every load, ~0.2 s). A game's
  grammar differs from the shipped one only in its task sentence, which is a plain terminal,
  so we parse the shared part once and put the sentence into the introduction afterwards.
  Deriving text reuses parsed start strings and queries too (``grammar.py``).
* The PDDL problem is translated for the planner once per ``load``; ``reset`` reloads that
  translation instead of translating the problem again (~0.1-1 s per reset).
* ``PddlEnv`` derives every applicable action's command text through the grammar on every step
  (most of a step's ~30 ms). ALFWorld's command templates only read facts that never change
  (which receptacle stands where), so the text of an action is memoised per game.

Both ``pddl2sas`` calls inside TextWorld rebind ``sys.argv``; :func:`preserved_argv` puts it
back so that callers never see it change.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import textworld
from textworld.core import GameState
from textworld.envs import PddlEnv
from textworld.envs.pddl import logic as pddl_logic
from textworld.generator.game import EntityInfo

from .grammar import CachedGrammar

#: The task rule of ALFWorld's grammar: ``"rhs": "Your task is to: <sentence>"``.
_TASK_RULE = re.compile(r'("rhs":\s*"Your task is to: )((?:[^"\\]|\\.)*)(")')
_PLACEHOLDER = "UNKNOWN GOAL."
#: Characters with a meaning in TextWorld's grammar language; a sentence without them is text.
_GRAMMAR_MARKUP = set("#{}[]|")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _template_key(template: str, mapping: Mapping[Any, Any]) -> tuple[str, ...]:
    """The variables a command template can read, with their values: the memo key.

    A template names the placeholders it reads ("go to [{r.name | receptacleatlocation(r:...,
    lend:...)}]" reads r and lend, not where the agent comes from), so only those count. A
    template that expands a rule (``#...#``) could read anything, so then all of them count.
    """
    if "#" in template:
        return tuple(f"{ph.name}={var.name}" for ph, var in mapping.items())
    words = set(_WORD.findall(template))
    return tuple(f"{ph.name}={var.name}" for ph, var in mapping.items() if ph.name in words)


@contextmanager
def preserved_argv() -> Iterator[None]:
    """Restore ``sys.argv`` (the same list object) after fast_downward replaces it."""
    saved = sys.argv
    try:
        yield
    finally:
        sys.argv = saved


@functools.cache
def alfworld_wrappers() -> tuple[type, type]:
    """ALFWorld's ``AlfredDemangler`` and ``AlfredInfos``, imported without side effects.

    Importing any ``alfworld`` module runs ``alfworld/info.py``, which creates the folder named
    by ``ALFWORLD_DATA`` (default ``~/.cache/alfworld``) and writes that variable into
    ``os.environ``. We point it at the system's temporary folder, which always exists, for the
    duration of the import and then restore the environment as it was.
    """
    previous = os.environ.get("ALFWORLD_DATA")
    os.environ["ALFWORLD_DATA"] = tempfile.gettempdir()
    try:
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    finally:
        if previous is None:
            os.environ.pop("ALFWORLD_DATA", None)
        else:
            os.environ["ALFWORLD_DATA"] = previous
    return AlfredDemangler, AlfredInfos


def split_task_sentence(grammar: str) -> tuple[str, str | None]:
    """(grammar with the task sentence replaced by a placeholder, the sentence or None)."""
    match = _TASK_RULE.search(grammar)
    if match is None:
        return grammar, None
    sentence = json.loads(f'"{match.group(2)}"')
    if _GRAMMAR_MARKUP & set(sentence):
        return grammar, None  # not plain text: let the grammar derive it
    base = grammar[: match.start(2)] + _PLACEHOLDER + grammar[match.end(2):]
    return base, sentence


@functools.lru_cache(maxsize=8)
def game_logic(domain: str, grammar: str) -> pddl_logic.GameLogic:
    """TextWorld's parsed domain + grammar, shared by every game with the same texts."""
    logic = pddl_logic.GameLogic(domain=domain, grammar=grammar)
    logic.grammar = CachedGrammar.adopt(logic.grammar)
    return logic


class SharedEntityInfo(EntityInfo):
    """An entity's names, shared instead of copied when the grammar copies its context.

    TextWorld's grammar deep-copies the variables of its context (entity infos) for every
    symbol it expands; that copying was most of a step's time. Derivation only reads the
    names, so handing out the same object is equivalent and much cheaper.
    """

    __slots__ = ()

    def __deepcopy__(self, memo: dict[int, Any]) -> SharedEntityInfo:
        return self


class FastPddlEnv(PddlEnv):
    """``PddlEnv`` with the speed-ups of this module; same observations and commands."""

    def load(self, filename_or_data: str | Mapping[str, Any]) -> None:
        if isinstance(filename_or_data, Mapping):
            data = dict(filename_or_data)
            self._game_file = None
        else:
            with open(filename_or_data) as handle:
                data = json.load(handle)
            self._game_file = filename_or_data
        self._game_data = data
        self.walkthrough = data.get("walkthrough")
        base, self._task_sentence = split_task_sentence(data["grammar"])
        self._logic = game_logic(data["pddl_domain"], base)
        self._command_memo: dict[tuple[str, tuple[str, ...]], str] = {}
        self._pddl_state = self._new_state()
        self._initial_facts = list(self._pddl_state.facts)
        self._state_is_fresh = True
        self._entity_infos = self._get_entity_infos()

    def _get_entity_infos(self) -> dict[str, EntityInfo]:
        infos = {}
        for fact in self._pddl_state.facts:
            for var in fact.arguments:
                if var.name not in infos:
                    info = SharedEntityInfo(var.name, var.type)
                    info.name, info.definite, info.indefinite = var.name, "the", "a"
                    infos[var.name] = info
        return infos

    def _new_state(self) -> pddl_logic.PddlState:
        with preserved_argv():
            return pddl_logic.PddlState(
                self.downward_lib, self._game_data["pddl_problem"], self._logic
            )

    def _context(self, action: Any = None) -> dict[str, Any]:
        mapping = action.mapping if action is not None else {}
        return {
            "state": self._pddl_state,
            "facts": list(self._pddl_state.facts),
            "variables": {ph.name: self._entity_infos[var.name] for ph, var in mapping.items()},
            "mapping": mapping,
            "entity_infos": self._entity_infos,
        }

    def _rewind(self) -> None:
        """Put the loaded game back in its initial state without translating it again.

        The planner library reloads the translated task (its initial state included) and the
        Python-side facts are restored from the copy taken at load time.
        """
        state = self._pddl_state
        self.downward_lib.load_sas(state.sas.encode("utf-8"))
        self.downward_lib.load_sas_replan(state.sas_replan.encode("utf-8"))
        for fact in list(state.facts):
            state.remove_fact(fact)
        state.add_facts(self._initial_facts)

    def reset(self) -> GameState:
        if not self._state_is_fresh:
            self._rewind()
        self._state_is_fresh = False
        self.prev_state = None
        self.state = GameState()
        self._last_action = None
        self._moves = 0
        intro = self._logic.grammar.derive("#intro#", self._context())
        if self._task_sentence is not None:
            intro = intro.replace(_PLACEHOLDER, self._task_sentence)
        self.state.feedback = intro
        self.state.raw = intro
        self._gather_infos()
        if "walkthrough" in self.request_infos.extras:
            self.state["extra.walkthrough"] = self.walkthrough or self.plan()
        return self.state

    def step(self, command: str) -> tuple[GameState, float, bool]:
        self._state_is_fresh = False
        return super().step(command)

    def _command_text(self, action: Any) -> str:
        key = (action.name, _template_key(action.command_template, action.mapping))
        text = self._command_memo.get(key)
        if text is None:
            template = self._logic.grammar.derive(action.command_template, self._context(action))
            action.command_template = template
            names = {k: info.name for k, info in self._entity_infos.items()}
            text = action.format_command(names)
            self._command_memo[key] = text
        return text

    def _gather_infos(self) -> None:
        """What ``step`` and our env read; ``PddlEnv`` also lists every fact, unrequested."""
        self.state["won"] = self._pddl_state.check_goal()
        self.state["lost"] = False
        self.state["last_action"] = None
        self.state["_last_action"] = self._last_action
        actions = list(self._pddl_state.all_applicable_actions())
        self.state["_valid_actions"] = actions
        self.state["_valid_commands"] = [self._command_text(a) for a in actions]
        self.state["admissible_commands"] = sorted(set(self.state["_valid_commands"]))
        if self.request_infos.facts:
            self.state["facts"] = [
                self._get_human_readable_fact(f) for f in self._pddl_state.facts
            ]
        if self.request_infos.moves:
            self.state["moves"] = self._moves
        if self.request_infos.policy_commands:
            self.state["policy_commands"] = self.plan()

    def plan(self) -> list[str]:
        """The planner's commands from the current state to the goal ([] if none or won)."""
        with preserved_argv():
            return list(self._pddl_state.replan(self._entity_infos))


#: Engines whose env was closed, kept for the next env: each holds a private copy of the planner
#: library, which cannot be unloaded safely (a later load then crashes) and takes ~0.15 s to copy.
_IDLE_ENGINES: list[FastPddlEnv] = []
_MAX_IDLE = 64


def make_textworld_env(request_infos: textworld.EnvInfos | None = None) -> Any:
    """``AlfredInfos(AlfredDemangler(FastPddlEnv))``: ALFWorld's wrapper stack on our engine."""
    demangler, infos_wrapper = alfworld_wrappers()
    if request_infos is None and _IDLE_ENGINES:
        engine = _IDLE_ENGINES.pop()
    else:
        default = textworld.EnvInfos(admissible_commands=True, won=True)
        engine = FastPddlEnv(request_infos or default)
        engine.reusable = request_infos is None
    return infos_wrapper(demangler(engine, shuffle=False))


def release_textworld_env(env: Any) -> None:
    """Hand a made env's engine back for reuse; the env must not be used afterwards."""
    engine = env.unwrapped
    if getattr(engine, "reusable", False) and len(_IDLE_ENGINES) < _MAX_IDLE:
        if all(engine is not idle for idle in _IDLE_ENGINES):
            _IDLE_ENGINES.append(engine)
