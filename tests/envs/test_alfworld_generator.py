"""The ALFWorld game generator on its own: determinism, knobs, splits, compatibility rules.

These tests parse the generated PDDL text with regular expressions; they need ALFWorld's data
tables (the alfworld extra) but not the planner.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

pytest.importorskip("textworld")
pytest.importorskip("alfworld")

from agentrl.errors import UserError  # noqa: E402
from agentrl_envs.alfworld import catalog, generator  # noqa: E402
from agentrl_envs.alfworld.catalog import TASK_TYPES  # noqa: E402

pytestmark = pytest.mark.alfworld

DEFAULT = generator.PRESETS["default"]
SMALL = generator.PRESETS["small"]


def first(split: str, index: int, config: generator.SceneConfig = DEFAULT) -> generator.GameSpec:
    return next(generator.iter_candidates(split, index, config))


def facts(problem: str, predicate: str) -> list[tuple[str, ...]]:
    """Arguments of the initial-state facts with that predicate (the goal is left out)."""
    init = problem.split("(:goal")[0]
    return [tuple(m.split()) for m in re.findall(rf"\({predicate} ([^()]*)\)", init)]


def receptacle_ids(problem: str) -> list[str]:
    return re.findall(r"^\s+(\S+) - receptacle$", problem, flags=re.M)


def test_same_seed_same_game_and_different_seeds_differ():
    a, b = first("train", 7), first("train", 7)
    assert (a.problem, a.goal, a.attempt) == (b.problem, b.goal, b.attempt)
    problems = {first("train", i).problem for i in range(12)}
    assert len(problems) == 12


def test_task_types_go_round_robin_over_indices():
    # game i has task type i mod 6, in the order of TASK_TYPES
    assert [first("train", i).task_type for i in range(8)] == [
        "pick_and_place", "pick_clean_then_place", "pick_heat_then_place",
        "pick_cool_then_place", "look_at_obj_in_light", "pick_two_obj_and_place",
        "pick_and_place", "pick_clean_then_place",
    ]
    only = generator.resolve_config("small", task_types=["look_at_obj_in_light", "pick_and_place"])
    assert [first("eval_seen", i, only).task_type for i in range(3)] == [
        "look_at_obj_in_light", "pick_and_place", "look_at_obj_in_light",
    ]


def test_every_task_type_has_seen_and_held_out_goals():
    for task_type in TASK_TYPES:
        goals = [g for room in catalog.TASK_ROOMS[task_type]
                 for g in generator.goal_choices(task_type, room)]
        held_out = [g for g in goals if generator.pairing_held_out(*g)]
        assert held_out and len(held_out) < len(goals), task_type


def test_held_out_fraction_is_about_one_in_five():
    # 3000 pairings, held out with probability 1/5: mean 600, sd sqrt(3000*.2*.8) ~ 22
    count = sum(generator.pairing_held_out(f"Obj{i}", f"Recep{i % 7}") for i in range(3000))
    assert 500 < count < 700


def test_splits_do_not_overlap():
    seen_layouts, seen_pairs, seen_problems = set(), set(), {}
    for split in ("train", "eval_seen"):
        for i in range(30):
            spec = first(split, i)
            assert not generator.pairing_held_out(spec.object_type, spec.target_type)
            assert not generator.layout_held_out(spec.room, spec.layout)
            assert generator.in_eval_seen(spec.problem) == (split == "eval_seen")
            seen_layouts.add((spec.room, spec.layout))
            seen_pairs.add((spec.object_type, spec.target_type))
            seen_problems.setdefault(spec.problem, set()).add(split)
    assert all(len(splits) == 1 for splits in seen_problems.values())
    for i in range(30):
        spec = first("eval_unseen", i)
        assert generator.pairing_held_out(spec.object_type, spec.target_type)
        assert generator.layout_held_out(spec.room, spec.layout)
        assert (spec.room, spec.layout) not in seen_layouts
        assert (spec.object_type, spec.target_type) not in seen_pairs


def test_small_preset_sizes_and_closed_knob():
    openable = catalog.openable()
    for i in range(24):
        spec = first("train", i, SMALL)
        ids = receptacle_ids(spec.problem)
        assert 4 <= len(ids) <= 6
        assert sum(n for _, n in spec.layout) == len(ids)
        # all openable receptacles start closed by default (as in ALFWorld)
        assert facts(spec.problem, "opened") == []
        n_openable = sum(1 for r in ids if spec.names[r] in openable)
        assert len(facts(spec.problem, "openable")) == n_openable
    always_open = generator.resolve_config("small", closed_prob=0.0)
    for i in range(6):
        spec = first("train", i, always_open)
        assert len(facts(spec.problem, "opened")) == len(facts(spec.problem, "openable"))


def test_distractor_knob_counts_objects():
    # distractors=3 exactly: objects = goal objects (1-3, plus the lamp for look) + 3
    config = generator.resolve_config("default", distractors=3)
    for i in range(12):
        spec = first("train", i, config)
        kinds = Counter(kind for _, kind in facts(spec.problem, "objectType"))
        goal_objects = kinds.pop(f"{spec.object_type}Type")
        if spec.task_type == "look_at_obj_in_light":
            assert kinds.pop(f"{spec.target_type}Type") == 1
        assert sum(kinds.values()) == 3
        assert 1 <= goal_objects <= 3
        if spec.task_type == "pick_two_obj_and_place":
            assert goal_objects >= 2


def test_objects_only_where_alfworld_allows_and_goal_not_already_met():
    table = catalog.can_contain()
    for split in generator.SPLITS:
        for i in range(18):
            spec = first(split, i)
            for obj_id, recep_id in facts(spec.problem, "inReceptacle"):
                obj, recep = spec.names[obj_id], spec.names[recep_id]
                if obj in catalog.LAMP_STANDS:
                    assert recep in catalog.LAMP_STANDS[obj]
                else:
                    assert obj in table[recep], (obj, recep)
                if spec.task_type != "look_at_obj_in_light" and obj == spec.object_type:
                    assert recep != spec.target_type  # else the goal could hold at the start
            # the appliance the task needs is in the room
            appliance = catalog.APPLIANCE.get(spec.task_type)
            if appliance:
                assert appliance in dict(spec.layout)


def test_ids_follow_alfworld_naming():
    spec = first("train", 1)  # a clean task: its room has a sink basin
    ids = receptacle_ids(spec.problem)
    assert "Sink_bar_1_bar_SinkBasin" in ids
    assert all(re.fullmatch(r"[A-Za-z]+_bar_\d+(_bar_[A-Za-z]+)?", r) for r in ids)


def test_goal_sentence_uses_alfworld_templates():
    templates = catalog.goal_templates()
    for i in range(12):
        spec = first("train", i)
        obj, target = spec.object_type.lower(), spec.target_type.lower()
        options = {t.format(obj=obj, recep=target, toggle=target) + "." for t in
                   templates[spec.task_type]}
        assert spec.goal in options


def test_bad_knobs_are_user_errors():
    with pytest.raises(UserError):
        generator.resolve_config("huge")
    with pytest.raises(UserError):
        generator.resolve_config("default", receptacles=(6, 4))
    with pytest.raises(UserError):
        generator.resolve_config("default", task_types=["juggle"])
    with pytest.raises(UserError):
        next(generator.iter_candidates("test", 0, DEFAULT))
