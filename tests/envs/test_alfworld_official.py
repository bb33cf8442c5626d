"""Official ALFWorld data: found where alfworld looks, indexed as alfworld indexes it, never
silently replaced by generated games; the paper protocol; the data fingerprint.

The game folders are built in ``tmp_path`` in the layout of ``alfworld-download``
(``json_2.1.1/<split>/<task>/<trial>/{game.tw-pddl,traj_data.json}``): real playable games come
from the exporter, and the entries alfworld's loader must skip (unsolvable, no ``solvable`` key,
no ``traj_data.json``, movable and sliced tasks, a task type outside the six) are written by hand.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("textworld")
pytest.importorskip("alfworld")

from agentrl.errors import UserError  # noqa: E402
from agentrl.rollout.action_format import ActionFormat  # noqa: E402
from agentrl.rollout.action_validity import ActionValidity  # noqa: E402
from agentrl.rundir.fingerprint import collect, describe  # noqa: E402
from agentrl_envs.alfworld import official  # noqa: E402
from agentrl_envs.alfworld.env import ALFWorldEnv  # noqa: E402
from agentrl_envs.alfworld.protocol import normalize_command  # noqa: E402

pytestmark = pytest.mark.alfworld
ROOT = Path(__file__).resolve().parents[2]
#: alfworld's names for our splits (AlfredTWEnv's train_eval argument).
TRAIN_EVAL = {"train": "train", "eval_seen": "eval_in_distribution",
              "eval_unseen": "eval_out_of_distribution"}


@pytest.fixture(autouse=True)
def no_data_anywhere(tmp_path, monkeypatch):
    """Every test starts on a machine without ALFWorld data: an empty home, no ALFWORLD_DATA."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    official.list_games.cache_clear()
    yield
    official.list_games.cache_clear()


def _trial(root: Path, split: str, task: str, trial: str, task_type: str | None,
           game: dict | None) -> Path:
    folder = root / "json_2.1.1" / official.SPLIT_DIRS[split] / task / trial
    folder.mkdir(parents=True, exist_ok=True)
    if task_type is not None:
        (folder / "traj_data.json").write_text(json.dumps({"task_type": task_type}))
    if game is not None:
        (folder / "game.tw-pddl").write_text(json.dumps(game))
    return folder


def _skipped_entries(root: Path, split: str) -> None:
    """Entries alfworld's collect_game_files leaves out, each for its own reason."""
    _trial(root, split, "pick_and_place_simple-Apple-None-Fridge-1", "trial_unsolvable",
           "pick_and_place_simple", {"solvable": False})
    _trial(root, split, "pick_and_place_simple-Apple-None-Fridge-1", "trial_nokey",
           "pick_and_place_simple", {"walkthrough": []})  # never checked: no solvable key
    _trial(root, split, "pick_and_place_simple-Apple-None-Fridge-1", "trial_notraj",
           None, {"solvable": True})  # no traj_data.json
    _trial(root, split, "pick_and_place_simple-Apple-None-Fridge-1", "trial_nogame",
           "pick_and_place_simple", None)  # annotations without a game file
    _trial(root, split, "pick_and_place_with_movable_recep-Apple-Bowl-Fridge-2", "trial_1",
           "pick_and_place_with_movable_recep", {"solvable": True})
    _trial(root, split, "pick_heat_then_place_in_recep-AppleSliced-None-Fridge-3", "trial_1",
           "pick_heat_then_place_in_recep", {"solvable": True})
    _trial(root, split, "strange_task-Apple-None-Fridge-4", "trial_1", "strange_task",
           {"solvable": True})


def _exported(root: Path, split: str, count: int) -> list[Path]:
    from agentrl_envs.alfworld.export import export_games

    return export_games(root, split, count, scene="small")


def _alfworld_index(root: Path, split: str) -> list[str]:
    """alfworld 0.4.2's own index: AlfredTWEnv.collect_game_files with the smallest config it
    reads (data paths, the six task types, no game limit)."""
    from agentrl_envs.alfworld.engine import alfworld_wrappers

    alfworld_wrappers()  # imports alfworld.agents.environment without touching ~/.cache
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv

    base = root / "json_2.1.1"
    config = {
        "env": {"goal_desc_human_anns_prob": 0, "task_types": [1, 2, 3, 4, 5, 6]},
        "dataset": {"data_path": str(base / "train"),
                    "eval_id_data_path": str(base / "valid_seen"),
                    "eval_ood_data_path": str(base / "valid_unseen"),
                    "num_train_games": -1, "num_eval_games": -1},
    }
    return AlfredTWEnv(config, train_eval=TRAIN_EVAL[split]).game_files


# --- the index -----------------------------------------------------------------------------------


def test_index_is_alfworlds_collect_game_files(tmp_path):
    data = tmp_path / "data"
    for split in ("train", "eval_seen", "eval_unseen"):
        _exported(data, split, 3)
        _skipped_entries(data, split)
    for split in ("train", "eval_seen", "eval_unseen"):
        ours = [str(g.path) for g in official.list_games(data / "json_2.1.1", split)]
        theirs = _alfworld_index(data, split)
        assert len(ours) == 3
        assert sorted(ours) == sorted(theirs)  # the same files as alfworld ...
        assert ours == sorted(ours)  # ... in path order (alfworld's os.walk order is the FS's)


def test_seed_i_plays_game_i_and_unsolvable_files_are_not_in_the_split(tmp_path):
    data = tmp_path / "data"
    paths = _exported(data, "eval_seen", 4)
    marked = json.loads(paths[1].read_text())
    marked["solvable"] = False
    paths[1].write_text(json.dumps(marked))
    index = official.list_games(data / "json_2.1.1", "eval_seen")
    assert [g.path for g in index] == sorted(p for p in paths if p != paths[1])
    env = ALFWorldEnv(split="eval_seen", data_path=data)
    assert env.source == "official" and env.data_fingerprint()["split_size"] == 3
    played = [env.reset(seed=seed)[1]["game"] for seed in range(7)]
    assert played == [str(index[s % 3].path) for s in range(7)]  # seed i -> game i (mod 3)
    env.close()


# --- no silent fallback ----------------------------------------------------------------------------


def test_data_is_found_where_alfworld_looks(tmp_path, monkeypatch):
    cache = Path(os.environ["HOME"]) / ".cache" / "alfworld"
    assert ALFWorldEnv(split="eval_seen").source == "generated"  # nothing anywhere: generated
    cache.mkdir(parents=True)  # what alfworld's import leaves: an empty cache ...
    assert ALFWorldEnv(split="eval_seen").source == "generated"
    monkeypatch.setenv("ALFWORLD_DATA", str(cache))  # ... and ALFWORLD_DATA naming it
    assert ALFWorldEnv(split="eval_seen").source == "generated"
    monkeypatch.delenv("ALFWORLD_DATA")
    _exported(cache, "eval_seen", 1)  # a plain alfworld-download, ALFWORLD_DATA unset
    env = ALFWorldEnv(split="eval_seen")
    assert env.source == "official"
    assert env.data_fingerprint()["local"]["found_via"] == "alfworld's default cache"
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(cache, elsewhere)
    monkeypatch.setenv("ALFWORLD_DATA", str(elsewhere))
    moved = ALFWorldEnv(split="eval_seen")
    assert moved.data_fingerprint()["local"]["found_via"] == "ALFWORLD_DATA"
    # the same games in another folder: the same fingerprint
    assert (collect(moved, "agentrl/ALFWorld-v0")["digest"]
            == collect(env, "agentrl/ALFWorld-v0")["digest"])


@pytest.mark.parametrize("case", ["missing data_path", "split folder as data_path",
                                  "empty ALFWORLD_DATA", "missing split", "official without data",
                                  "scene knobs with official data", "paper without data",
                                  "data_path with generated source"])
def test_every_silent_fallback_is_now_an_error(tmp_path, monkeypatch, case):
    data = tmp_path / "data"
    _exported(data, "eval_seen", 1)
    kwargs: dict = {"split": "eval_seen"}
    expected = ""
    if case == "missing data_path":
        kwargs["data_path"] = tmp_path / "nowhere"
        expected = "does not exist"
    elif case == "split folder as data_path":
        kwargs["data_path"] = data / "json_2.1.1" / "valid_seen"
        expected = "one split's folder"
    elif case == "empty ALFWORLD_DATA":
        (tmp_path / "empty").mkdir()
        monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "empty"))
        expected = "holds no ALFWorld games"
    elif case == "missing split":  # valid_seen is there, train is not: no mixing
        kwargs.update(split="train", data_path=data)
        expected = "no 'train' folder"
    elif case == "official without data":
        kwargs["source"] = "official"
        expected = "alfworld-download"
    elif case == "scene knobs with official data":
        kwargs.update(data_path=data, scene="small")
        expected = "scene knobs"
    elif case == "paper without data":
        kwargs["protocol"] = "paper"
        expected = "ALFWORLD_DATA"
    elif case == "data_path with generated source":
        kwargs.update(data_path=data, source="generated")
        expected = "never reads"
    with pytest.raises(UserError, match=expected):
        ALFWorldEnv(**kwargs)


def test_paper_config_without_data_is_one_sentence_and_exit_2(tmp_path):
    home, data = tmp_path / "home", tmp_path / "alfworld_data"
    data.mkdir()
    environ = {**os.environ, "HOME": str(home), "ALFWORLD_DATA": str(data),
               "AGENTRL_AUTO_BACKEND": "hf"}
    done = subprocess.run(
        [sys.executable, "-m", "agentrl", "run", "sapo", "--config",
         "benchmarks/configs/paper_qwen1.5b_alfworld.yaml", "--run-dir", str(tmp_path / "run")],
        cwd=ROOT, env=environ, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 2, done.stderr
    message = " ".join(done.stderr.split())
    assert message.startswith("error: ") and message.count(". ") == 0, message  # one sentence
    assert "alfworld-download" in message and "ALFWORLD_DATA" in message
    assert "Traceback" not in done.stderr and not (tmp_path / "run").exists()


# --- the paper protocol ----------------------------------------------------------------------------


def test_paper_protocol(tmp_path):
    data = tmp_path / "data"
    _exported(data, "eval_unseen", 2)
    env = ALFWorldEnv(split="eval_unseen", data_path=data, protocol="paper")
    _, info = env.reset(seed=0)
    assert "help" not in info["admissible_actions"] and "look" in info["admissible_actions"]
    assert env.metadata["invalid_action_rule"] == "malformed"
    assert env.metadata["normalize_action"]("Go to  Cabinet 1 ") == "go to cabinet 1"
    fingerprint = collect(env, "agentrl/ALFWorld-v0", {"protocol": "paper"})
    assert fingerprint["protocol"] == "paper" and fingerprint["split_size"] == 2
    assert fingerprint["source"] == "official"  # read as files, but games agentrl made:
    assert "2 of 2 games were generated by agentrl" in fingerprint["comparability"]
    assert "source official" in describe(fingerprint)
    env.close()
    with pytest.raises(UserError, match="50 steps"):
        ALFWorldEnv(split="eval_unseen", data_path=data, protocol="paper", max_steps=30)
    with pytest.raises(UserError, match="official games"):
        ALFWorldEnv(split="eval_unseen", source="generated", protocol="paper")
    default = ALFWorldEnv(split="eval_unseen", data_path=data)
    assert "help" in default.reset(seed=0)[1]["admissible_actions"]  # the default lists it
    assert default.metadata["invalid_action_rule"] == "inadmissible"
    default.close()


def test_downloaded_games_carry_no_comparability_warning(tmp_path):
    data = tmp_path / "data"
    for number, path in enumerate(_exported(data, "eval_unseen", 2)):  # named as in the download
        path.parent.rename(path.parent.with_name(f"trial_T20190907_21283{number}_000000"))
    fingerprint = collect(ALFWorldEnv(split="eval_unseen", data_path=data), "agentrl/ALFWorld-v0")
    assert fingerprint["source"] == "official" and "comparability" not in fingerprint
    assert "not comparable" not in describe(fingerprint)


def test_validity_rules():
    listed = ["go to cabinet 1", "look"]
    plain = ActionValidity()
    assert plain.judge("<action>look</action>", "look", listed)
    assert not plain.judge("<action>Go to Cabinet 1</action>", "Go to Cabinet 1", listed)
    assert not plain.judge("no tags", None, listed)
    normalised = ActionValidity(normalize=normalize_command)
    assert normalised.judge("", "Go to  Cabinet 1", listed)  # judged as the game plays it
    assert not normalised.judge("", "go to cabinet 2", listed)
    # verl-agent's rule: only malformed replies are invalid
    paper = ActionValidity.from_metadata({"invalid_action_rule": "malformed"},
                                         ActionFormat(think=True))
    good = "<think>the cabinet</think><action>go to cabinet 2</action>"
    assert paper.judge(good, "go to cabinet 2", listed)  # inadmissible but well formed
    assert not paper.judge("<action>look</action>", "look", listed)  # no think tags
    assert not paper.judge("<think>看</think><action>look</action>", "look", listed)  # CJK
    assert not paper.judge("<think>x</think> look", None, listed)
    no_think = ActionValidity.from_metadata({"invalid_action_rule": "malformed"}, ActionFormat())
    assert no_think.judge("<action>look</action>", "look", listed)
    with pytest.raises(ValueError):
        ActionValidity.from_metadata({"invalid_action_rule": "lenient"}, ActionFormat())


def test_generated_fingerprint_says_not_comparable():
    env = ALFWorldEnv(split="eval_unseen", scene="small")
    fingerprint = collect(env, "agentrl/ALFWorld-v0", {"scene": "small"})
    assert fingerprint["source"] == "generated" and fingerprint["split_size"] is None
    assert "not comparable to published ALFWorld numbers" in describe(fingerprint)
    assert fingerprint["versions"]["alfworld"] and fingerprint["versions"]["textworld"]
    other = collect(ALFWorldEnv(split="eval_unseen"), "agentrl/ALFWorld-v0", {})
    assert other["digest"] != fingerprint["digest"]  # other scenes, other games
