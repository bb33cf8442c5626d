"""``train.parallel=fsdp`` and equal optimizer steps under torchrun (2 gloo processes, CPU).

* FSDP's update equals one process's on the same global batch (tests/fsdp_update_job.py): the
  global loss sums, the gradient (gathered from the shards) and the parameters after AdamW's
  first step, for SAPO (value rows trained through the tied head), PPO (sharded critic) and GRPO,
  each with a sharded KL reference. Tolerances are fp32 summation-order ones: gradients within
  1e-5 absolute (measured ~6e-7 on gradients of size ~0.3), parameters within 1e-4 (Adam's first
  step moves a weight by ~lr = 1e-3; measured ~8e-6).
* Ranks with 3 and 7 turns (``minibatch_turns`` 2: 2 and 4 optimizer steps of their own) finish
  the update in step, with and without FSDP; before agentrl.algorithms.lockstep this hung.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
UPDATE_JOB = ROOT / "tests" / "fsdp_update_job.py"
TIMEOUT_S = 240  # a hang fails the test instead of blocking the suite


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(ROOT))
    return env


def _run(args: list[str], processes: int) -> None:
    launcher = [sys.executable] if processes == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes)]
    done = subprocess.run(launcher + [str(a) for a in args], env=_env(), cwd=ROOT,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]


def _load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=False)


@pytest.fixture(scope="module")
def updates(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fsdp-updates")
    _run([UPDATE_JOB, out, "sapo,ppo,grpo", "none"], processes=1)
    _run([UPDATE_JOB, out, "sapo,ppo,grpo", "fsdp"], processes=2)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["sapo", "ppo", "grpo"])
def test_fsdp_update_equals_one_process(updates, algo):
    one, fsdp = _load(updates / f"none-{algo}.pt"), _load(updates / f"fsdp-{algo}.pt")
    assert one["steps"] == [1.0] and fsdp["steps"] == [1.0, 1.0]
    assert fsdp["loss_policy_sum"] == pytest.approx(one["loss_policy_sum"], rel=1e-5, abs=1e-6)
    assert fsdp["loss_value_sum"] == pytest.approx(one["loss_value_sum"], rel=1e-5, abs=1e-6)
    assert fsdp["metrics"]["optim/grad_norm"] == pytest.approx(one["metrics"]["optim/grad_norm"], rel=1e-5)
    pairs = [("grads", 1e-5), ("params", 1e-4)]
    if algo == "ppo":
        pairs += [("critic_grads", 1e-5), ("critic_params", 1e-4)]
    for key, tol in pairs:
        assert set(fsdp[key]) == set(one[key]), key
        for name, value in one[key].items():
            torch.testing.assert_close(fsdp[key][name], value, atol=tol, rtol=0, msg=f"{key} {name}")
    if algo == "sapo":  # the value rows (last two rows of the tied embedding) were trained
        grad = fsdp["grads"]["model.embed_tokens.weight"]
        assert float(grad[-2:].abs().sum()) > 0


@pytest.mark.slow
def test_uneven_turn_counts_take_equal_steps(tmp_path):
    """Rank 0 holds 3 turns, rank 1 holds 7; two turns per minibatch."""
    _run([UPDATE_JOB, tmp_path, "sapo,ppo", "none,fsdp", "turns=3,7", "minibatch_turns=2",
          "micro_batch_tokens=16"], processes=2)
    norms = {}
    for parallel in ("none", "fsdp"):
        for algo in ("sapo", "ppo"):
            result = _load(tmp_path / f"{parallel}-{algo}.pt")
            assert result["steps"] == [4.0, 4.0], (parallel, algo)  # the longer rank's 4 steps
            norms[parallel, algo] = result["metrics"]["optim/grad_norm"]
    for algo in ("sapo", "ppo"):  # FSDP and data parallelism computed the same steps
        assert norms["fsdp", algo] == pytest.approx(norms["none", algo], rel=1e-5)


TRAIN_JOB = ROOT / "tests" / "fsdp_train_job.py"
VOLATILE = ("time/", "memory/", "perf/", "wall_time")  # wall clock and memory differ between runs


def _records(run_dir: Path) -> list[dict]:
    import json

    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_fsdp_checkpoint_resumes_exactly_and_exports_a_transformers_folder(tmp_path):
    """Two iterations of SAPO and of PPO under FSDP (2 epochs x minibatches of 4 turns, sampled
    rollouts, evaluation on gathered weights), checkpoints at 1 and 2; then each run is cut back
    to checkpoint 1 and resumed: iteration 2 is redone with the same numbers and weights (PPO:
    the critic and both optimizers come back from the shards). The exported folder loads in
    transformers with the sharded checkpoint's logits."""
    import shutil

    from safetensors.torch import load_file

    whole, cut = tmp_path / "whole", tmp_path / "cut"
    _run([TRAIN_JOB, whole], processes=2)
    for algo in ("sapo", "ppo"):
        records = _records(whole / algo)
        assert [r["iteration"] for r in records] == [1, 2]
        assert records[-1]["optim/steps"] > 2 and "eval/return" in records[-1]
        shutil.copytree(whole / algo, cut / algo)
        shutil.rmtree(cut / algo / "checkpoints" / "iter_00002")
        (cut / algo / "checkpoints" / "latest").write_text("iter_00001\n")
    _run([TRAIN_JOB, cut, "--resume"], processes=2)

    for algo in ("sapo", "ppo"):
        redone, original = _records(cut / algo)[-1], _records(whole / algo)[-1]
        assert redone["iteration"] == 2
        for key, value in original.items():
            if not key.startswith(VOLATILE):
                assert redone[key] == value, (algo, key)
        a = load_file(str(whole / algo / "checkpoints" / "iter_00002" / "model.safetensors"))
        b = load_file(str(cut / algo / "checkpoints" / "iter_00002" / "model.safetensors"))
        assert set(a) == set(b) and "lm_head.weight" not in a  # the tied head is written once
        for name in a:
            assert torch.equal(a[name], b[name]), (algo, name)
    assert "optim/critic_grad_norm" in original

    # the exported folder in transformers == the DCP shards loaded into a plain model
    import torch.distributed.checkpoint as dcp
    from transformers import AutoModelForCausalLM

    folder = whole / "sapo" / "checkpoints" / "iter_00002"
    exported = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    plain = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        for p in plain.parameters():
            p.zero_()
    state = {"policy": {"model": plain.state_dict()}}
    dcp.load(state, checkpoint_id=str(folder / "sharded"))
    plain.load_state_dict(state["policy"]["model"])
    ids = torch.tensor([[1, 5, 17, 300, 42, 7, 99, 2]])
    with torch.no_grad():
        assert torch.equal(exported(ids).logits, plain(ids).logits)
    assert float(plain.get_output_embeddings().weight.detach()[-2:].abs().sum()) > 0  # SAPO's value rows


@pytest.mark.parametrize("overrides,words", [
    (["train.parallel=zero3"], "train.parallel"),
    (["train.parallel=fsdp", "model.lora_rank=8"], "LoRA"),
    (["train.parallel=fsdp", "model.reference_offload=true"], "reference_offload"),
])
def test_parallel_setting_is_checked_when_the_config_is_built(overrides, words):
    from agentrl.errors import UserError
    from agentrl.training.config import build_config

    with pytest.raises(UserError, match=words):
        build_config(algo="sapo", env="keydoor", model="tiny", overrides=overrides)


def test_fsdp_needs_torchrun():
    from agentrl.algorithms import SAPO, SAPOConfig
    from agentrl.errors import UserError
    from agentrl.models.loading import build_tiny_model, load_tokenizer, resolve_model
    from agentrl.models.policy import Policy
    from agentrl.parallel.fsdp import shard_algorithm

    tok = load_tokenizer(resolve_model("tiny"))
    algo = SAPO(SAPOConfig(kl_coef=0.0), Policy(build_tiny_model(len(tok)), tok), r_max=1.0)
    with pytest.raises(UserError, match="torchrun"):
        shard_algorithm(algo)
