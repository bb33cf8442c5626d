"""Run folders are never a place where data is lost or code is run (issue 28, first half).

* a command that writes a folder (run, bench, suite, report) refuses a non-empty folder that is
  not of its kind and leaves every byte of it as it was;
* a run folder's ``trainer_state.pt`` is loaded with ``weights_only=True``: a crafted pickle is
  refused and runs nothing; a cut-off one is skipped for the checkpoint before it;
* a non-finite loss or weight stops the run before it reaches a checkpoint (``latest`` stays the
  last good one), or, with ``algorithm.nonfinite: skip``, drops that step and counts it;
* a full disk is one sentence with the path and the bytes, and the run stays resumable.

Every run here is the tiny model on KeyDoor, a few seconds each.
"""

from __future__ import annotations

import errno
import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from agentrl.cli import app
from agentrl.errors import UserError
from agentrl.rundir.checkpoints import latest_checkpoint, read_state, resume_checkpoint
from agentrl.rundir.metrics import read_records
from agentrl.training.config import build_config

runner = CliRunner()

#: The smallest run that checkpoints every iteration.
TINY = ["--env", "keydoor", "--model", "tiny", "--set", "rollout.tasks_per_iteration=2",
        "--set", "rollout.max_turns=2", "--set", "rollout.max_new_tokens=8", "--set", "train.save_every=1",
        "--set", "train.samples_per_iteration=0"]


def _overrides(run_dir: Path, iterations: int, *extra: str) -> list[str]:
    """TINY's settings as ``--set`` texts, for runs made in this process with the Trainer."""
    sets = [TINY[i + 1] for i in range(4, len(TINY), 2)]
    return [*sets, f"train.run_dir={run_dir}", f"train.iterations={iterations}", *extra]


def _error_line(result) -> str:
    """The one ``error:`` line a refused command prints (exit 2, nothing else on stderr)."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` with its bytes (folders as ``None``-free keys ending in /)."""
    out: dict[str, bytes] = {}
    for path in sorted(folder.rglob("*")):
        out[str(path.relative_to(folder)) + ("/" if path.is_dir() else "")] = b"" if path.is_dir() else path.read_bytes()
    return out


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A 2-iteration SAPO run with checkpoints iter_00001 and iter_00002 (made once, copied)."""
    run_dir = tmp_path_factory.mktemp("made") / "run"
    result = runner.invoke(app, ["run", "sapo", *TINY, "--iterations", "2", "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    return run_dir


@pytest.fixture
def run_copy(finished_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(finished_run, copy)
    return copy


# --- folders that are not a command's own ---------------------------------------------------------


def _project(tmp_path: Path) -> Path:
    """A user's project folder: its own config.yaml (an agentrl config, even), code and data."""
    folder = tmp_path / "project"
    (folder / "src").mkdir(parents=True)
    (folder / "config.yaml").write_text("algorithm:\n  lr: 3.0e-5\nrollout:\n  max_turns: 7\n")
    (folder / "src" / "train.py").write_text("print('my code')\n")
    (folder / "data.bin").write_bytes(bytes(range(256)))
    return folder


@pytest.mark.parametrize("argv", [
    ["run", "sapo", "--model", "tiny", "--run-dir", "{p}"],
    ["run", "sapo", "--model", "tiny", "--run-dir", "{p}", "--resume"],
    ["run", "sapo", "--model", "tiny", "--set", "train.run_dir={p}"],
    ["bench", "--model", "tiny", "--seeds", "1", "-o", "{p}"],
    ["suite", "--seeds", "1", "-o", "{p}"],
    ["report", "{p}/src", "-o", "{p}"],
], ids=["run", "run --resume", "run train.run_dir", "bench", "suite", "report"])
def test_a_folder_of_another_kind_is_refused_and_left_byte_identical(tmp_path, argv):
    folder = _project(tmp_path)
    before = _snapshot(folder)
    result = runner.invoke(app, [a.replace("{p}", str(folder)) for a in argv])
    line = _error_line(result)
    assert "holds files that are not" in line and "config.yaml" in line, line
    assert _snapshot(folder) == before  # same names, same bytes: 3 files, 1 folder
    assert len(before) == 4


@pytest.mark.parametrize("argv", [
    ["run", "sapo", "--model", "tiny", "--run-dir", ""],
    ["run", "sapo", "--model", "tiny", "--set", "train.run_dir="],
    ["bench", "--model", "tiny", "-o", ""],
    ["suite", "-o", " "],
    ["report", "x", "-o", ""],
    ["sft", "--model", "tiny", "--demos", "d.jsonl", "-o", ""],
    ["demos", "--model", "tiny", "-o", ""],
    ["eval", "--model", "tiny", "-o", ""],
], ids=["run", "run --set", "bench", "suite", "report", "sft", "demos", "eval"])
def test_an_empty_path_is_refused_and_nothing_is_written_here(tmp_path, monkeypatch, argv):
    """An unset shell variable used to make a run train into the current folder."""
    monkeypatch.chdir(tmp_path)
    line = _error_line(runner.invoke(app, argv))
    assert "is empty (an unset shell variable?)" in line, line
    assert list(tmp_path.iterdir()) == []


def test_a_run_resumes_with_notes_of_its_own_beside_it(run_copy):
    """A run is recognised by its config.yaml and fingerprint.json, not by holding nothing else."""
    from agentrl.rundir.checkpoints import check_run_dir, is_run_dir

    (run_copy / "notes.txt").write_text("lr looked high\n")
    assert is_run_dir(run_copy)
    check_run_dir(str(run_copy))  # no error
    assert not is_run_dir(run_copy / "checkpoints")


def test_what_a_restart_leaves_of_a_run_may_be_trained_into(tmp_path):
    """A bench restarting a run without a checkpoint removes its config.yaml and log, leaving
    fingerprint.json: still a run's folder. A lone hand-written config.yaml is not."""
    from agentrl.rundir.checkpoints import check_run_dir

    folder = tmp_path / "seed0"
    folder.mkdir()
    (folder / "fingerprint.json").write_text("{}\n")
    (folder / "tensorboard").mkdir()
    check_run_dir(str(folder))  # no error
    (folder / "config.yaml").write_text("algorithm:\n  lr: 1.0e-5\n")
    with pytest.raises(UserError, match="it holds files that are not an agentrl run"):
        check_run_dir(str(folder))


def test_a_bench_folder_is_its_own_kind_for_a_bench_only(tmp_path):
    """bench.json makes a folder a bench's (it resumes there); a run folder is not one."""
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "bench.json").write_text('{"sessions": []}\n')
    result = runner.invoke(app, ["bench", "--model", "tiny", "--seeds", "0", "-o", str(bench)])
    assert "--seeds must be at least 1" in _error_line(result)  # got past the folder check
    result = runner.invoke(app, ["suite", "--seeds", "1", "-o", str(bench)])
    assert "not a suite's output (bench.json)" in _error_line(result)


# --- nothing in a run folder is executed --------------------------------------------------------


class _Payload:
    """A pickle that, loaded the unsafe way, creates a file (the marker the test looks for)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_crafted_trainer_state_is_refused_and_runs_nothing(run_copy, tmp_path):
    marker = tmp_path / "pwned"
    state = run_copy / "checkpoints" / "iter_00002" / "trainer_state.pt"
    torch.save({"iteration": 2, "payload": _Payload(marker)}, state)
    pickle.loads(pickle.dumps(_Payload(tmp_path / "proof")))  # loaded the unsafe way, it does run
    assert (tmp_path / "proof").exists()
    result = runner.invoke(app, ["run", "sapo", "--run-dir", str(run_copy), "--resume", "--iterations", "3"])
    line = _error_line(result)
    assert "holds objects other than tensors and plain numbers" in line and "iter_00002" in line, line
    assert not marker.exists()
    assert [r["iteration"] for r in read_records(run_copy / "metrics.jsonl")] == [1, 2]  # untouched


def test_a_sharded_checkpoint_index_is_read_without_running_code(tmp_path):
    """FSDP checkpoints: DCP unpickles ``.metadata`` the unsafe way, so agentrl reads it first
    with an unpickler that admits DCP's records only."""
    import torch.distributed.checkpoint as dcp

    from agentrl.training.sharded_checkpoint import check_metadata

    sharded = tmp_path / "sharded"
    dcp.save({"model": {"w": torch.zeros(3, 2), "b": torch.ones(2, dtype=torch.bfloat16)}}, checkpoint_id=str(sharded))
    check_metadata(sharded)  # DCP's own index: accepted
    marker = tmp_path / "pwned"
    (sharded / ".metadata").write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(UserError, match=r"it is not a plain sharded-checkpoint index \(it names pathlib.Path.touch\)"):
        check_metadata(sharded)
    assert not marker.exists()


def test_checkpoint_state_holds_only_tensors_and_plain_numbers(finished_run):
    """What the trainer writes loads with weights_only=True, RNG states included."""
    state = torch.load(finished_run / "checkpoints" / "iter_00002" / "trainer_state.pt", weights_only=True)
    assert state["iteration"] == 2
    assert isinstance(state["torch_rng"], torch.Tensor) and state["torch_rng"].dtype == torch.uint8
    version, internal, gauss = state["python_rng"]
    assert version == 3 and len(internal) == 625 and gauss is None  # Mersenne Twister: 624 words + index


def test_a_state_written_by_earlier_versions_still_loads(tmp_path):
    """Earlier versions stored random.getstate()'s tuple itself: plain ints, so weights_only
    reads it, and the trainer turns it back into the tuple random.setstate wants."""
    import random

    from agentrl.training.trainer import _python_rng_state

    folder = tmp_path / "iter_00001"
    folder.mkdir()
    random.seed(7)
    torch.save({"iteration": 1, "python_rng": random.getstate(), "torch_rng": torch.get_rng_state()},
               folder / "trainer_state.pt")
    expected = random.random()
    random.seed(8)
    random.setstate(_python_rng_state(read_state(folder)["python_rng"]))
    assert random.random() == expected


def test_a_cut_off_latest_checkpoint_falls_back_to_the_one_before(run_copy):
    state = run_copy / "checkpoints" / "iter_00002" / "trainer_state.pt"
    state.write_bytes(state.read_bytes()[:300])  # a copy or a full disk that stopped early
    result = runner.invoke(app, ["run", "sapo", "--run-dir", str(run_copy), "--resume", "--iterations", "3"])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1 and warnings[0].startswith("warning: checkpoint iter_00002 ("), result.stderr
    assert warnings[0].endswith("cannot be read, so the run resumes from iter_00001")
    # iteration 2 was redone from checkpoint 1, then 3: the log holds 1, 2, 3 once each
    assert [r["iteration"] for r in read_records(run_copy / "metrics.jsonl")] == [1, 2, 3]
    assert latest_checkpoint(run_copy).name == "iter_00003"
    assert read_state(latest_checkpoint(run_copy))["iteration"] == 3


def test_no_readable_checkpoint_is_one_sentence(run_copy):
    for name in ("iter_00001", "iter_00002"):
        (run_copy / "checkpoints" / name / "trainer_state.pt").write_bytes(b"")
    line = _error_line(runner.invoke(app, ["run", "sapo", "--run-dir", str(run_copy), "--resume"]))
    assert "none of its checkpoints can be read" in line and "iter_00001 (the file is empty or cut off)" in line


# --- non-finite numbers -------------------------------------------------------------------------


def _nan_loss_at(monkeypatch, iteration: int) -> None:
    """Make the policy loss NaN in the update of ``iteration`` (1-based), as a bad batch would."""
    import agentrl.algorithms.base as base

    real = base.clipped_policy_loss
    calls = {"update": 0}
    real_new_batch = base.ClippedPolicyGradient.new_batch

    def new_batch(self, trajectories):
        calls["update"] += 1
        return real_new_batch(self, trajectories)

    def poisoned(*args, **kwargs):
        loss, terms = real(*args, **kwargs)
        return (loss * float("nan"), terms) if calls["update"] == iteration else (loss, terms)

    monkeypatch.setattr(base, "clipped_policy_loss", poisoned)
    monkeypatch.setattr(base.ClippedPolicyGradient, "new_batch", new_batch)


def _all_finite(checkpoint: Path) -> bool:
    from safetensors.torch import load_file

    return all(bool(torch.isfinite(t).all()) for t in load_file(checkpoint / "model.safetensors").values())


def test_a_nan_loss_mid_run_stops_it_and_latest_stays_the_good_checkpoint(tmp_path, monkeypatch):
    _nan_loss_at(monkeypatch, 2)
    run_dir = tmp_path / "run"
    result = runner.invoke(app, ["run", "sapo", *TINY, "--iterations", "3", "--run-dir", str(run_dir)])
    line = _error_line(result)
    assert line == ("error: Iteration 2 stopped the run: the loss is nan, so its step was not applied "
                    "(algorithm.nonfinite=skip would drop such minibatches instead); checkpoint iter_00001 "
                    "stays the latest."), line
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["iter_00001", "latest"]
    assert (run_dir / "checkpoints" / "latest").read_text().strip() == "iter_00001"
    assert _all_finite(run_dir / "checkpoints" / "iter_00001")
    assert [r["iteration"] for r in read_records(run_dir / "metrics.jsonl")] == [1]


def test_skip_drops_the_nan_minibatch_and_counts_it(tmp_path, monkeypatch):
    from safetensors.torch import load_file

    from agentrl.training.trainer import train

    _nan_loss_at(monkeypatch, 2)
    run_dir = tmp_path / "run"
    cfg = build_config(algo="sapo", env="keydoor", model="tiny",
                       overrides=_overrides(run_dir, 2, "algorithm.nonfinite=skip", "algorithm.lr=1e-3"))
    records = train(cfg).history
    # one minibatch per update (2 episodes x 2 turns at most, minibatch_turns 64): iteration 2's only
    # step is dropped, so its checkpoint holds exactly iteration 1's weights
    assert [r["optim/nonfinite_skipped"] for r in records] == [0.0, 1.0]
    assert [r["optim/steps"] for r in records] == [1.0, 0.0]
    first = load_file(run_dir / "checkpoints" / "iter_00001" / "model.safetensors")
    second = load_file(run_dir / "checkpoints" / "iter_00002" / "model.safetensors")
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def test_an_infinite_rate_mid_run_stops_before_a_checkpoint_of_inf_weights(tmp_path):
    """The config refuses ``lr: .inf``; a rate that becomes infinite in the optimizer (a scheduler,
    a plugin) is caught by the weights check after the step."""
    from agentrl.training.trainer import Trainer

    run_dir = tmp_path / "run"
    cfg = build_config(algo="grpo", env="keydoor", model="tiny",
                       overrides=[*_overrides(run_dir, 3), "algorithm.group_size=2"])
    trainer = Trainer(cfg)

    def after(record):
        if record["iteration"] == 1:
            for group in trainer.algorithm.optimizer.param_groups:
                group["lr"] = float("inf")

    try:
        with pytest.raises(UserError, match=r"^Iteration 2 stopped the run: a weight is (nan|inf|-inf) after a "
                                            r"step \(a step too large: lower the learning rate\); checkpoint "
                                            r"iter_00001 stays the latest\.$"):
            trainer.train(after)
    finally:
        trainer.close()
    assert latest_checkpoint(run_dir).name == "iter_00001"
    assert not (run_dir / "checkpoints" / "iter_00002").exists()
    assert _all_finite(run_dir / "checkpoints" / "iter_00001")


# --- a full disk ------------------------------------------------------------------------------


def test_a_full_disk_at_a_checkpoint_is_one_sentence_and_the_run_stays_resumable(tmp_path, monkeypatch):
    from agentrl.rundir.durable import folder_bytes
    from agentrl.training.trainer import Trainer

    run_dir = tmp_path / "run"
    trainer = Trainer(build_config(algo="sapo", env="keydoor", model="tiny", overrides=_overrides(run_dir, 2)))
    real_save = trainer.policy.model.save_pretrained

    def save(folder, *args, **kwargs):
        if Path(folder).name == ".tmp-iter_00002":
            real_save(folder, *args, **kwargs)  # half the checkpoint is written, then the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_save(folder, *args, **kwargs)

    monkeypatch.setattr(trainer.policy.model, "save_pretrained", save)
    try:
        with pytest.raises(UserError) as caught:
            trainer.train()
    finally:
        trainer.close()
    size = folder_bytes(run_dir / "checkpoints" / "iter_00001")
    assert size > 1_000_000  # the tiny model's weights alone are a few MB
    assert str(caught.value) == (
        f"No space left on the device for checkpoint '{run_dir / 'checkpoints' / 'iter_00002'}' "
        f"(about {size:,} bytes, the size of the previous one); free some space, then "
        f"`--run-dir {run_dir} --resume` continues from iter_00001.")
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["iter_00001", "latest"]
    folder, state, notes = resume_checkpoint(run_dir)
    assert (folder.name, state["iteration"], notes) == ("iter_00001", 1, [])


def test_a_full_disk_on_a_file_replacement_keeps_the_old_file(tmp_path, monkeypatch):
    import agentrl.rundir.durable as durable

    target = tmp_path / "summary.json"
    target.write_text("old\n")

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(durable.os, "fsync", full)
    with pytest.raises(UserError, match=rf"^No space left on the device writing '{target}' \(12 bytes needed\)"):
        durable.atomic_write_text(target, "new content\n")  # 12 bytes
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]  # no temporary left
    with pytest.raises(UserError, match=r"\(8 bytes needed\)"):
        durable.append_line(tmp_path / "metrics.jsonl", '{"a":1}')  # 7 characters and the newline


# --- names and orders -------------------------------------------------------------------------


def test_an_algorithm_is_one_name_whatever_its_case(run_copy):
    """``run SAPO`` records sapo, and a run is resumed by any spelling of its algorithm."""
    assert build_config(algo="SAPO").algo == "sapo"
    config = run_copy / "config.yaml"
    config.write_text(config.read_text().replace("algo: sapo", "algo: SAPO", 1))  # as older versions wrote it
    result = runner.invoke(app, ["run", "sapo", "--run-dir", str(run_copy), "--resume"])
    assert result.exit_code == 0, result.output  # finished already: nothing to train, no refusal


def test_eval_of_a_run_folder_uses_its_newest_checkpoint_and_says_so(finished_run):
    result = runner.invoke(app, ["eval", "--model", str(finished_run), "--episodes", "1"])
    assert result.exit_code == 0, result.output
    newest = finished_run / "checkpoints" / "iter_00002"
    assert f"model {finished_run} is a run: using its newest checkpoint, {newest}" in result.stdout
    assert f"using the rollout settings of run {finished_run}" in result.stdout
