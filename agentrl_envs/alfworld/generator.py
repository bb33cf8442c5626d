"""Generate ALFWorld-style household games: a room, its receptacles and objects, and a goal.

A game is a PDDL problem in ALFWorld's ``alfred`` domain plus the goal sentence; together with
the domain and the text grammar it forms the ``game.tw-pddl`` dict that TextWorld's
``PddlEnv`` plays. Generation is pure Python and takes about a millisecond; whether a game is
solvable and not already won is checked afterwards by the planner (see ``env.py``), and a
failed candidate is replaced by the next one of the same seed, so the choice stays
deterministic.

Splits
------
* ``train`` and ``eval_seen`` draw from the same *seen* layouts and object-receptacle
  pairings. A game belongs to ``eval_seen`` exactly when a hash of its PDDL problem falls in
  one bucket out of ten, so no game can appear in both.
* ``eval_unseen`` uses only *held-out* layouts (a hash of the room type and its receptacle
  counts) and *held-out* goal pairings (a hash of the object type and the receptacle or lamp
  type of the goal): about a fifth of each. The seen splits never use either, so an unseen
  game is new in its room layout and in what goes where.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from agentrl.errors import UserError

from . import catalog
from .catalog import TASK_TYPES

SPLITS: tuple[str, ...] = ("train", "eval_seen", "eval_unseen")

#: One game in ten of the seen distribution goes to eval_seen.
EVAL_SEEN_BUCKETS = 10
#: One layout (and one pairing) in five is held out for eval_unseen.
UNSEEN_BUCKETS = 5


@dataclass(frozen=True)
class SceneConfig:
    """Difficulty knobs of generated games.

    ``receptacles`` and ``distractors`` are inclusive (min, max) ranges drawn per game;
    ``closed_prob`` is the chance that an openable receptacle (fridge, cabinet, drawer,
    microwave, safe) starts closed (ALFWorld: always); ``task_types`` restricts the goals.
    Game ``i`` of a split has task type ``task_types[i % len(task_types)]``, so every type is
    equally represented in any run of consecutive seeds.
    """

    receptacles: tuple[int, int] = (11, 16)
    distractors: tuple[int, int] = (6, 12)
    closed_prob: float = 1.0
    task_types: tuple[str, ...] = TASK_TYPES

    def __post_init__(self) -> None:
        for name in ("receptacles", "distractors"):
            low, high = getattr(self, name)
            if not 0 <= low <= high:
                raise UserError(f"ALFWorld knob {name}={(low, high)} must be a range min <= max.")
        if self.receptacles[1] < 2:
            raise UserError("ALFWorld knob receptacles needs at least 2 receptacles.")
        if not 0.0 <= self.closed_prob <= 1.0:
            raise UserError(f"ALFWorld knob closed_prob={self.closed_prob} must be in [0, 1].")
        unknown = [t for t in self.task_types if t not in TASK_TYPES]
        if unknown or not self.task_types:
            raise UserError(
                f"ALFWorld task_types {list(self.task_types)} must be a non-empty subset of "
                f"{list(TASK_TYPES)}."
            )


#: Named knob sets. ``small`` is sized for CPU experiments with a small model and a short
#: horizon (15-30 steps): a handful of receptacles and few distractors.
PRESETS: dict[str, SceneConfig] = {
    "default": SceneConfig(),
    "small": SceneConfig(receptacles=(4, 6), distractors=(2, 4)),
}


@dataclass(frozen=True)
class GameSpec:
    """A generated game before the planner has checked it."""

    split: str
    index: int
    attempt: int
    task_type: str
    room: str
    object_type: str
    target_type: str  # receptacle type, or the lamp type for look_at_obj_in_light
    goal: str  # the goal sentence, e.g. "put a tomato in microwave."
    layout: tuple[tuple[str, int], ...]  # receptacle type -> count, sorted
    problem: str  # the PDDL problem text
    names: dict[str, str] = field(default_factory=dict, compare=False)  # id -> type

    def game_data(self) -> dict:
        """The ``game.tw-pddl`` dict (walkthrough and solvability still unknown)."""
        return {
            "pddl_domain": catalog.domain_text(),
            "grammar": catalog.grammar_text().replace("UNKNOWN GOAL", self.goal.rstrip(".")),
            "pddl_problem": self.problem,
            "solvable": None,
            "walkthrough": None,
        }


def stable_bucket(*parts: str, buckets: int) -> int:
    """A bucket in ``range(buckets)`` from a hash that is the same on every machine and run."""
    digest = hashlib.sha256("|".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") % buckets


def layout_held_out(room: str, layout: tuple[tuple[str, int], ...]) -> bool:
    signature = ",".join(f"{t}={n}" for t, n in layout)
    return stable_bucket("layout", room, signature, buckets=UNSEEN_BUCKETS) == 0


def pairing_held_out(object_type: str, target_type: str) -> bool:
    return stable_bucket("pairing", object_type, target_type, buckets=UNSEEN_BUCKETS) == 0


def in_eval_seen(problem: str) -> bool:
    return stable_bucket("game", problem, buckets=EVAL_SEEN_BUCKETS) == 0


def goal_choices(task_type: str, room: str) -> list[tuple[str, str]]:
    """Every (object type, target type) goal that task type can have in that room type.

    The target is a receptacle type (a lamp type for look tasks). Besides the object fitting
    the target, the room must offer another receptacle type for the object to start in, so
    that the game is not won before the agent moves.
    """
    spec = catalog.ROOMS[room]
    table = catalog.can_contain()
    receptacle_types = list(spec.receptacles)
    choices = []
    if task_type == "look_at_obj_in_light":
        for obj in spec.objects:
            if catalog.holders(obj, receptacle_types):
                choices.extend((obj, lamp) for lamp in spec.lamps)
        return choices
    appliance = catalog.APPLIANCE.get(task_type)
    if appliance is not None and appliance not in spec.receptacles:
        return []
    prop = catalog.PROPERTY_NEEDED.get(task_type)
    able = catalog.object_properties()[prop] if prop else None
    for obj in spec.objects:
        if able is not None and obj not in able:
            continue
        for target in receptacle_types:
            if target == appliance or obj not in table.get(target, ()):
                continue
            if any(r != target for r in catalog.holders(obj, receptacle_types)):
                choices.append((obj, target))
    return choices


def _instance_id(kind: str, k: int) -> str:
    """An id that ALFWorld's demangler turns into "<kind lowercased> <n>" (see catalog)."""
    prefix = catalog.BASIN_PREFIX.get(kind)
    if prefix is not None:
        return f"{prefix}_bar_{k}_bar_{kind}"
    return f"{kind}_bar_{k}"


def _draw_layout(
    rng: random.Random, room: str, required: list[str], size: int
) -> tuple[tuple[str, int], ...]:
    spec = catalog.ROOMS[room]
    counts: dict[str, int] = {}
    for kind in required:
        counts[kind] = counts.get(kind, 0) or 1
    usual = [k for k, (low, _) in spec.receptacles.items() if low >= 1 and k not in counts]
    rng.shuffle(usual)
    capacity = sum(high for _, high in spec.receptacles.values())
    size = max(min(size, capacity), len(counts))
    for kind in usual:
        if sum(counts.values()) >= size:
            break
        counts[kind] = 1
    while sum(counts.values()) < size:
        open_kinds = [k for k, (_, high) in spec.receptacles.items() if counts.get(k, 0) < high]
        kind = rng.choice(open_kinds)
        counts[kind] = counts.get(kind, 0) + 1
    return tuple(sorted(counts.items()))


def _goal_pddl(task_type: str, obj: str, target: str) -> str:
    """The goal formula; it asks for any object/receptacle of the named types, as ALFWorld."""
    if task_type == "look_at_obj_in_light":
        return (
            "(:goal (exists (?a - agent ?l - location ?r - receptacle ?t - object ?o - object)\n"
            "        (and (atLocation ?a ?l) (receptacleAtLocation ?r ?l) (inReceptacle ?t ?r)\n"
            f"             (objectType ?t {target}Type) (toggleable ?t) (isToggled ?t)\n"
            f"             (objectType ?o {obj}Type) (holds ?a ?o))))"
        )
    if task_type == "pick_two_obj_and_place":
        return (
            "(:goal (exists (?r - receptacle ?o1 - object ?o2 - object)\n"
            f"        (and (receptacleType ?r {target}Type) (not (= ?o1 ?o2))\n"
            f"             (objectType ?o1 {obj}Type) (inReceptacle ?o1 ?r)\n"
            f"             (objectType ?o2 {obj}Type) (inReceptacle ?o2 ?r))))"
        )
    state = {
        "pick_clean_then_place": " (isClean ?o)",
        "pick_heat_then_place": " (isHot ?o)",
        "pick_cool_then_place": " (isCool ?o)",
    }.get(task_type, "")
    return (
        "(:goal (exists (?r - receptacle ?o - object)\n"
        f"        (and (receptacleType ?r {target}Type) (objectType ?o {obj}Type)"
        f" (inReceptacle ?o ?r){state})))"
    )


def _problem_text(
    receptacles: list[tuple[str, str]],
    objects: list[tuple[str, str, str]],
    opened: set[str],
    goal: str,
) -> str:
    """PDDL problem: ``receptacles`` as (id, type), ``objects`` as (id, type, holder id)."""
    properties = catalog.object_properties()
    table = catalog.can_contain()
    openable = catalog.openable()
    locations = {rid: f"loc_bar_{i + 1}" for i, (rid, _) in enumerate(receptacles)}
    rtypes = sorted({t for _, t in receptacles} | {"SinkBasin", "Microwave", "Fridge"})
    otypes = sorted({t for _, t, _ in objects} | {"Knife", "ButterKnife"})
    decl = ["agent1 - agent"]
    decl += [f"{t}Type - otype" for t in otypes] + [f"{t}Type - rtype" for t in rtypes]
    decl += [f"{oid} - object" for oid, _, _ in objects]
    decl += [f"{rid} - receptacle" for rid, _ in receptacles]
    decl += ["loc_bar_0 - location"] + [f"{loc} - location" for loc in locations.values()]
    init = ["(atLocation agent1 loc_bar_0)"]
    for rid, kind in receptacles:
        init.append(f"(receptacleType {rid} {kind}Type)")
        init.append(f"(receptacleAtLocation {rid} {locations[rid]})")
        if kind in openable:
            init.append(f"(openable {rid})")
            if rid in opened:
                init.append(f"(opened {rid})")
    flags = (
        ("Heatable", "heatable"), ("Coolable", "coolable"), ("Cleanable", "cleanable"),
        ("Toggleable", "toggleable"), ("Sliceable", "sliceable"),
    )
    for oid, kind, holder in objects:
        init.append(f"(objectType {oid} {kind}Type)")
        init.append(f"(inReceptacle {oid} {holder})")
        init.append(f"(objectAtLocation {oid} {locations[holder]})")
        if kind not in properties["Toggleable"]:  # lamps stay where they stand
            init.append(f"(pickupable {oid})")
        for prop, predicate in flags:
            if kind in properties[prop]:
                init.append(f"({predicate} {oid})")
        if kind in catalog.RECEPTACLE_OBJECTS:
            init.append(f"(isReceptacleObject {oid})")
    for rtype in sorted({t for _, t in receptacles}):
        for otype in sorted({t for _, t, _ in objects}):
            if otype in table.get(rtype, ()):
                init.append(f"(canContain {rtype}Type {otype}Type)")
    lines = ["(define (problem agentrl_alfworld)", "    (:domain alfred)", "    (:objects"]
    lines += [f"        {d}" for d in decl] + ["    )", "    (:init"]
    lines += [f"        {fact}" for fact in init] + ["    )", f"    {goal}", ")", ""]
    return "\n".join(lines)


def draw_candidate(split: str, index: int, attempt: int, config: SceneConfig) -> GameSpec | None:
    """Attempt ``attempt`` at game ``index`` of ``split``; None when it falls in another split."""
    if split not in SPLITS:
        raise UserError(f"Unknown ALFWorld split '{split}'; choose one of {list(SPLITS)}.")
    unseen = split == "eval_unseen"
    rng = random.Random(f"agentrl-alfworld|{split}|{index}|{attempt}")
    task_type = config.task_types[index % len(config.task_types)]
    rooms = list(catalog.TASK_ROOMS[task_type])
    room = rng.choice(rooms)
    goals = [g for g in goal_choices(task_type, room) if pairing_held_out(*g) == unseen]
    if not goals:
        return None
    obj, target = rng.choice(goals)
    spec = catalog.ROOMS[room]
    receptacle_types = list(spec.receptacles)

    # Receptacles the goal needs: where the object starts, where it goes, the appliance.
    if task_type == "look_at_obj_in_light":
        sources = catalog.holders(obj, receptacle_types)
        stand = rng.choice([s for s in catalog.LAMP_STANDS[target] if s in spec.receptacles])
        required = [rng.choice(sources), stand]
    else:
        sources = [r for r in catalog.holders(obj, receptacle_types) if r != target]
        required = [target, rng.choice(sources)]
        if task_type in catalog.APPLIANCE:
            required.append(catalog.APPLIANCE[task_type])
    size = rng.randint(*config.receptacles)
    layout = None
    for _ in range(20):
        drawn = _draw_layout(rng, room, required, size)
        if layout_held_out(room, drawn) == unseen:
            layout = drawn
            break
    if layout is None:
        return None

    receptacles: list[tuple[str, str]] = []
    for kind, count in layout:
        receptacles += [(_instance_id(kind, k + 1), kind) for k in range(count)]
    table = catalog.can_contain()

    def place(kind: str, exclude: str | None = None) -> str | None:
        spots = [rid for rid, rk in receptacles if kind in table.get(rk, ()) and rk != exclude]
        return rng.choice(spots) if spots else None

    objects: list[tuple[str, str, str]] = []
    counts: dict[str, int] = {}

    def add(kind: str, holder: str) -> None:
        counts[kind] = counts.get(kind, 0) + 1
        objects.append((_instance_id(kind, counts[kind]), kind, holder))

    if task_type == "look_at_obj_in_light":
        stands = [rid for rid, rk in receptacles if rk in catalog.LAMP_STANDS[target]]
        add(target, rng.choice(stands))
        n_target = rng.choice((1, 1, 2))
        exclude = None
    else:
        n_target = rng.choice((2, 2, 3)) if task_type == "pick_two_obj_and_place" else (
            rng.choice((1, 1, 2))
        )
        exclude = target
    for _ in range(n_target):
        holder = place(obj, exclude)
        if holder is None:
            return None
        add(obj, holder)
    present = [rk for _, rk in receptacles]
    distractor_kinds = [
        o for o in spec.objects if o != obj and catalog.holders(o, present)
    ]
    for _ in range(rng.randint(*config.distractors)):
        kind = rng.choice(distractor_kinds)
        holder = place(kind)
        if holder is not None:
            add(kind, holder)
    openable = catalog.openable()
    opened = {
        rid for rid, rk in receptacles if rk in openable and rng.random() >= config.closed_prob
    }
    problem = _problem_text(receptacles, objects, opened, _goal_pddl(task_type, obj, target))
    if split != "eval_unseen" and in_eval_seen(problem) != (split == "eval_seen"):
        return None
    template = rng.choice(catalog.goal_templates()[task_type])
    goal = template.format(obj=obj.lower(), recep=target.lower(), toggle=target.lower()) + "."
    names = {rid: rk for rid, rk in receptacles} | {oid: ok for oid, ok, _ in objects}
    return GameSpec(
        split=split, index=index, attempt=attempt, task_type=task_type, room=room,
        object_type=obj, target_type=target, goal=goal, layout=layout, problem=problem,
        names=names,
    )


def iter_candidates(
    split: str, index: int, config: SceneConfig, max_attempts: int = 1000
) -> Iterator[GameSpec]:
    """The candidates for game ``index`` of ``split``, in their fixed order."""
    for attempt in range(max_attempts):
        spec = draw_candidate(split, index, attempt, config)
        if spec is not None:
            yield spec
    raise UserError(
        f"Could not generate ALFWorld game {index} of split '{split}' with {config}; "
        "loosen the knobs (more receptacles, more task types)."
    )


def resolve_config(scene: str = "default", **overrides: object) -> SceneConfig:
    """A preset by name with some knobs overridden (None leaves a knob as the preset has it)."""
    if scene not in PRESETS:
        raise UserError(f"Unknown ALFWorld scene preset '{scene}'; choose one of {list(PRESETS)}.")
    changes = {k: v for k, v in overrides.items() if v is not None}
    for key in ("receptacles", "distractors"):
        if key in changes:
            value = changes[key]
            changes[key] = (value, value) if isinstance(value, int) else tuple(value)
    if "task_types" in changes:
        value = changes["task_types"]
        changes["task_types"] = (value,) if isinstance(value, str) else tuple(value)
    return replace(PRESETS[scene], **changes)
