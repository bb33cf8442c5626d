"""Metrics streamed to TensorBoard and Weights & Biases (offline), read back with their own readers."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from agentrl.cli import app

runner = CliRunner()

TINY_RUN = ["--model", "tiny", "--set", "rollout.action_mode=constrained", "--set", "rollout.tasks_per_iteration=2",
            "--set", "rollout.max_turns=3", "--set", "train.eval_episodes=0"]


def _records(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
    pytest.importorskip("tensorboard")
    pytest.importorskip("wandb")
    run_dir = tmp_path_factory.mktemp("logged") / "run"
    result = runner.invoke(app, ["run", "grpo", "--env", "keydoor", *TINY_RUN, "--iterations", "2",
                                 "--run-dir", str(run_dir), "--logger", "tensorboard,wandb",
                                 "--set", "algorithm.group_size=2"],
                           env={"WANDB_MODE": "offline", "WANDB_SILENT": "true"})
    assert result.exit_code == 0, result.output
    return run_dir, result.output


def test_plain_line_per_iteration_when_output_is_not_a_terminal(logged_run):
    run_dir, output = logged_run
    records = _records(run_dir)
    lines = [line for line in output.splitlines() if line.startswith("iteration ")]
    assert [line.split()[1] for line in lines] == ["1/2", "2/2"]
    assert f"return {records[1]['rollout/return']:.3f}" in lines[1]


def test_tensorboard_events_hold_every_numeric_metric(logged_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir, _ = logged_run
    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    tags = set(events.Tags()["scalars"])
    for record in _records(run_dir):
        for key in ("rollout/return", "loss/policy", "time/rollout", "optim/steps"):
            assert key in tags
            value = {e.step: e.value for e in events.Scalars(key)}[record["iteration"]]
            assert value == pytest.approx(record[key], rel=1e-6, abs=1e-6)  # float32 in the file
    assert "config" in "".join(events.Tags()["tensors"])  # the run config, as text


def _wandb_records(path):
    """The protobuf records of a W&B transaction log (``run-*.wandb``): a 7-byte header (``:W&B``,
    magic, version), then LevelDB-log blocks of 32 KiB holding records of checksum (4 bytes),
    length (2, little-endian) and type (1: full, 2: first, 3: middle, 4: last)."""
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    block, offset, pending, out = 32768, 7, b"", []
    while offset + 7 <= len(data):
        if block - offset % block < 7:  # a block's tail too short for a header is padding
            offset += block - offset % block
            continue
        length = int.from_bytes(data[offset + 4:offset + 6], "little")
        kind = data[offset + 6]
        if kind == 0 and length == 0:
            break
        chunk = data[offset + 7:offset + 7 + length]
        offset += 7 + length
        if kind == 1:
            out.append(chunk)
        elif kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk
        elif kind == 4:
            out.append(pending + chunk)
    return out


def test_wandb_offline_run_holds_the_metrics_and_config(logged_run):
    from wandb.proto import wandb_internal_pb2

    run_dir, _ = logged_run
    files = list((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1, files
    history, config = [], {}
    for data in _wandb_records(files[0]):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type")
        if kind == "history":
            history.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                            for item in record.history.item})
        elif kind in ("run", "config"):  # the config comes with the run record, updates after
            updates = record.run.config.update if kind == "run" else record.config.update
            config.update({item.key: json.loads(item.value_json) for item in updates})
    expected = _records(run_dir)
    assert [h["_step"] for h in history] == [r["iteration"] for r in expected]
    for logged, record in zip(history, expected, strict=True):
        assert logged["rollout/return"] == pytest.approx(record["rollout/return"])
        assert logged["loss/policy"] == pytest.approx(record["loss/policy"])
    assert config["algo"] == "grpo" and config["train"]["loggers"] == ["tensorboard", "wandb"]


def test_unknown_logger_is_one_sentence(tmp_path):
    result = runner.invoke(app, ["run", "grpo", "--env", "keydoor", *TINY_RUN, "--logger", "mlflow",
                                 "--run-dir", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "Unknown logger 'mlflow'" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "r").exists()
