"""benchmarks/gpu_check.py's dry run: the GPU check's code path on CPU with the tiny shape, so the
script is known to run before a GPU is at hand (in-process for all four runs, and one run through
the per-run subprocess the GPU path uses)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_gpu_check_dry_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENTRL_AUTO_BACKEND", "hf")
    script = _script()
    payload = script.main(["--dry-run", "--out", str(tmp_path / "check.json")])
    assert set(payload["results"]) == {f"dry/{e}/{a}" for e in ("keydoor", "alfworld") for a in ("sapo", "ppo")}
    for name, result in payload["results"].items():
        assert "error" not in result, (name, result)
        assert result["turns"] > 0 and result["actor_update"] > 0
        assert (result["critic_update"] > 0) == name.endswith("ppo")
    assert {(r["shape"], r["env"]) for r in payload["ratios"]} == {("dry", "keydoor"), ("dry", "alfworld")}
    assert "PPO/SAPO update time" in capsys.readouterr().out
    assert (tmp_path / "check.json").is_file()

    model_dir = script.build_model_folder("dry", tmp_path / "model", "cpu")
    spec = dict(shape="dry", env="keydoor", algo="sapo", model_dir=str(model_dir), dry_run=True,
                vllm_memory=0.25, run_dir=str(tmp_path / "isolated"))
    result = script._run_in_subprocess(spec, timeout_s=240)
    assert result["turns"] > 0 and result["vllm_sleep"] == 0.0


@pytest.mark.slow
def test_gpu_check_dry_run_compares_asynchronous_rollouts(monkeypatch, capsys):
    monkeypatch.setenv("AGENTRL_AUTO_BACKEND", "hf")
    payload = _script().main(["--dry-run", "--envs", "keydoor", "--algos", "sapo", "--staleness", "1"])
    assert set(payload["results"]) == {"dry/keydoor/sapo", "dry/keydoor/sapo@k0", "dry/keydoor/sapo@k1"}
    assert all("error" not in r for r in payload["results"].values()), payload["results"]
    assert "k=0 / k" in capsys.readouterr().out
