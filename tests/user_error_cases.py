"""User mistakes on the command line, one row each: the table behind tests/test_user_errors.py and
docs/bad_input.md (rendered by docs/tools/bad_input_table.py from these same rows).

Each case is what a user types (``{tmp}`` is a scratch folder, holding the files the case lists)
and a piece of the one sentence agentrl must answer with. Every case must fail with exit code 2,
one ``error:`` line on stderr and no traceback, before any model is trained or any episode is
played.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

TINY = ("--model", "tiny")
DEMO_LINE = json.dumps({"messages": [{"role": "user", "content": "go"}], "reply": "<action>go</action>"})
#: A model folder saved from a run of the tiny test model: head size 64 / 4 = 16.
TINY_CONFIG = json.dumps({"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128,
                          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                          "vocab_size": 49152})



def _safetensors() -> bytes:
    """A whole one-tensor safetensors file (four float32 zeros), written by hand."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    return len(header).to_bytes(8, "little") + header + bytes(16)


#: The sections of a run's config.yaml, empty (enough to be taken for a run directory).
RUN_CONFIG = "algo: sapo\nenv: {}\nmodel: {}\nrollout: {}\ntrain: {}\nalgorithm: {}\n"
METRICS_LINE = json.dumps({"iteration": 1, "rollout/success_rate": 0.5}) + "\n"

#: A user's env module with one method or space swapped for a broken one (tests of the contract).
BAD_ENV = """import gymnasium as gym
import agentrl

INFO = {{"task": "say hi", "admissible_actions": ["say hi"], "won": False}}


class Env(gym.Env):
    metadata = {{"r_max": 1.0}}

    def __init__(self):
        self.observation_space = agentrl.text_space()
        self.action_space = {action_space}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        {reset}

    def step(self, action):
        {step}


gym.register("{env_id}", entry_point=Env)
"""


def _bad_env(env_id: str, reset: str = "return 'start', INFO", step: str = "return 'ok', 0.0, True, False, INFO",
             action_space: str = "agentrl.text_space()") -> str:
    return BAD_ENV.format(env_id=env_id, reset=reset, step=step, action_space=action_space)


#: Six levels of ten aliases each: 10^6 leaves in seven short lines.
ALIAS_BOMB = "env:\n  kwargs:\n    a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 6))


@dataclass(frozen=True)
class Case:
    """One mistake: ``argv`` after ``agentrl``; ``files`` to create under ``{tmp}`` first (content
    ``None``: a folder); ``expect``: a piece of the message; ``env``: environment variables."""

    what: str
    argv: tuple[str, ...]
    expect: str
    files: tuple[tuple[str, str | bytes | None], ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=())

    def command(self, tmp: str = "tmp") -> str:
        """The command as a user would type it (quoted where the shell needs it)."""
        import shlex

        return shlex.join(["agentrl", *(a.replace("{tmp}", tmp) for a in self.argv)])

    def materialise(self, tmp: Path) -> list[str]:
        """Create the case's files under ``tmp``; return argv with ``{tmp}`` filled in."""
        for name, content in self.files:
            path = tmp / name
            if content is None:
                path.mkdir(parents=True, exist_ok=True)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        return [a.replace("{tmp}", str(tmp)) for a in self.argv]


#: A user's project folder: a config.yaml of its own (which a run would overwrite) and a README.
PROJECT = (("project/config.yaml", "algorithm:\n  lr: 3.0e-5\n"), ("project/README", "my project\n"))


def _run(*extra: str, algo: str = "sapo") -> tuple[str, ...]:
    return ("run", algo, *TINY, *extra)


def _set(*pairs: str, algo: str = "sapo") -> tuple[str, ...]:
    return _run(*(x for pair in pairs for x in ("--set", pair)), algo=algo)


def _sft(demo: str | bytes | None, *extra: str, name: str = "demos.jsonl") -> dict:
    files = () if demo is None else ((name, demo),)
    return {"argv": ("sft", *TINY, "--demos", "{tmp}/" + name, "-o", "{tmp}/out", *extra), "files": files}


CASES: list[Case] = [
    # --- what to run ---------------------------------------------------------------------------
    Case("unknown algorithm", ("run", "nosuchalgo"), "Unknown algorithm 'nosuchalgo'"),
    Case("algorithm missing", ("run",), "Missing argument"),
    Case("unknown command", ("trian", "sapo"), "No such command 'trian'"),
    Case("unknown option", ("run", "sapo", "--iteratons", "3"), "No such option: --iteratons"),
    Case("a word where a number goes", ("eval", *TINY, "--episodes", "many"), "Invalid value for '--episodes'"),
    Case("unknown env", _run("--env", "nosuchenv"), "Unknown env 'nosuchenv'"),
    Case("unknown env in play", ("play", "nosuchenv"), "Unknown env 'nosuchenv'"),
    Case("env module that does not exist", _run("--env", "nosuchmod:Guess-v0"), "Cannot import env module 'nosuchmod'"),
    Case("env module that registers no such env", _run("--env", "json:Guess-v0"), "is not registered after importing 'json'"),
    Case("module:EnvId with an empty part", _run("--env", "mymod:"), "is not of the form module:EnvId"),
    Case("--import of a missing module", ("--import", "nosuchmod", "envs"), "Cannot import env module 'nosuchmod'"),
    Case("env.imports naming a missing module", _set("env.imports=[nosuchmod]"), "Cannot import env module 'nosuchmod'"),
    Case("env module that raises at import", _run("--env", "raising_env:Raise-v0"),
         "Cannot import env module 'raising_env': RuntimeError: no licence server (full traceback in ",
         files=(("raising_env.py", "raise RuntimeError('no licence server')\n"),)),
    Case("env module with a syntax error", _run("--env", "syntax_env:Syntax-v0"),
         "Cannot import env module 'syntax_env': SyntaxError: ", files=(("syntax_env.py", "def broken(:\n    pass\n"),)),
    Case("env module missing a dependency", ("--import", "needy_env", "envs"),
         "Cannot import env module 'needy_env': ModuleNotFoundError: No module named 'nosuchdependency_xyz'",
         files=(("needy_env.py", "import nosuchdependency_xyz\n"),)),
    Case("--import of an empty name", ("--import", "", "envs"), "An env module name is empty"),
    Case("--import of a relative name", ("--import", ".relative", "envs"), "is not an absolute module name"),
    Case("relative module in --env", _run("--env", ".foo:Bar-v0"), "'.foo' is not an absolute module name"),
    Case("env with int observations", _run("--env", "intobs_env:IntObs-v0"),
         "Env 'IntObs-v0' breaks the text-env contract: reset(seed=0) returned an observation of type int",
         files=(("intobs_env.py", _bad_env("IntObs-v0", reset='return 3, INFO')),)),
    Case("env with a Discrete action space", _run("--env", "discrete_env:Discrete-v0"),
         "Env 'Discrete-v0' breaks the text-env contract: its action_space is Discrete(4)",
         files=(("discrete_env.py", _bad_env("Discrete-v0", action_space="gym.spaces.Discrete(4)")),)),
    Case("env with the old 4-tuple step", _run("--env", "oldstep_env:OldStep-v0"),
         "step('xyzzy plugh') returned 4 values (gym's old obs, reward, done, info)",
         files=(("oldstep_env.py", _bad_env("OldStep-v0", step="return 'ok', 0.0, False, INFO")),)),
    Case("env whose reset returns the observation only", _run("--env", "obsonly_env:ObsOnly-v0"),
         "Env 'ObsOnly-v0' breaks the text-env contract: reset(seed=0) returned the observation alone",
         files=(("obsonly_env.py", _bad_env("ObsOnly-v0", reset="return 'start'")),)),
    Case("env whose info lacks the task", _run("--env", "notask_env:NoTask-v0"),
         "Env 'NoTask-v0' breaks the text-env contract: reset(seed=0): info lacks 'task'",
         files=(("notask_env.py", _bad_env("NoTask-v0", reset="return 'start', {'won': False}")),)),
    # --- config files and --set ------------------------------------------------------------------
    Case("config file missing", _run("--config", "{tmp}/nope.yaml"), "Cannot read config file"),
    Case("config file not YAML", _run("--config", "{tmp}/bad.yaml"), "is not valid YAML",
         files=(("bad.yaml", "rollout: [unclosed\n"),)),
    Case("config file holds a list", _run("--config", "{tmp}/list.yaml"), "must hold a mapping",
         files=(("list.yaml", "- a\n- b\n"),)),
    Case("config section unknown", _run("--config", "{tmp}/c.yaml"), "Unknown config section 'colour'",
         files=(("c.yaml", "colour: blue\n"),)),
    Case("config section not a mapping", _run("--config", "{tmp}/c.yaml"), "Config section 'rollout' must be a mapping",
         files=(("c.yaml", "rollout: 5\n"),)),
    Case("config file with a latin-1 byte", _run("--config", "{tmp}/c.yaml"), "is not UTF-8 text: line 2 holds the byte 0xe9",
         files=(("c.yaml", b"train:\n  iterations: 2  # caf\xe9\n"),)),
    Case("run config with a latin-1 byte, resumed", _run("--run-dir", "{tmp}/old", "--resume"),
         "config file '{tmp}/old/config.yaml' is not UTF-8 text: line 1",
         files=(("old/config.yaml", b"algo: sapo # \xff\n"), ("old/fingerprint.json", "{}"))),
    Case("YAML alias bomb in env.kwargs", _run("--config", "{tmp}/bomb.yaml"), "expands to more than 100,000 values",
         files=(("bomb.yaml", ALIAS_BOMB),)),
    Case("section given twice", _run("--config", "{tmp}/c.yaml"), "sets 'train' twice (lines 1 and 3)",
         files=(("c.yaml", "train:\n  iterations: 2\ntrain:\n  seed: 1\n"),)),
    Case("section given as a word", _run("--config", "{tmp}/c.yaml"), "Config section 'model' must be a mapping, not 'tiny'",
         files=(("c.yaml", "model: tiny\n"),)),
    Case("malformed --set", _set("algorithm.lr"), "Malformed --set 'algorithm.lr'"),
    Case("--set with an empty key part", _set("algorithm..lr=1"), "has an empty part"),
    Case("unknown config key", _set("algorithm.nope=1"), "Unknown config key 'algorithm.nope'"),
    Case("another algorithm's key", _set("algorithm.group_size=4"), "Unknown config key 'algorithm.group_size'"),
    Case("integer key given a word", _set("train.iterations=many"), "must be an integer"),
    Case("boolean key given a word", _set("rollout.think=maybe"), "must be true or false"),
    Case("number key given a word", _set("algorithm.lr=fast"), "must be a number"),
    Case("mapping key given a number", _set("env.kwargs=5"), "must be a mapping"),
    Case("action mode misspelt", _set("rollout.action_mode=constraint"), "must be one of free, constrained"),
    # --- ranges ----------------------------------------------------------------------------------
    Case("zero iterations", _run("--iterations", "0"), "'train.iterations' must be at least 1, not 0"),
    Case("negative iterations", _set("train.iterations=-1"), "'train.iterations' must be at least 1"),
    Case("no tasks per iteration", _set("rollout.tasks_per_iteration=0"), "'rollout.tasks_per_iteration' must be at least 1"),
    Case("GRPO group of 0", _set("algorithm.group_size=0", algo="grpo"), "'algorithm.group_size' must be at least 2"),
    Case("GRPO group of 1", _set("algorithm.group_size=1", algo="grpo"), "'algorithm.group_size' must be at least 2"),
    Case("micro-batch of 0 tokens", _set("algorithm.micro_batch_tokens=0"), "'algorithm.micro_batch_tokens' must be at least 1"),
    Case("minibatch of 0 turns", _set("algorithm.minibatch_turns=0"), "'algorithm.minibatch_turns' must be at least 1"),
    Case("zero epochs", _set("algorithm.epochs=0"), "'algorithm.epochs' must be at least 1"),
    Case("negative temperature", _set("rollout.temperature=-1"), "'rollout.temperature' must be at least 0"),
    Case("top_p of 0", _set("rollout.top_p=0"), "'rollout.top_p' must be in (0, 1]"),
    Case("top_p above 1", _set("rollout.top_p=1.5"), "'rollout.top_p' must be in (0, 1]"),
    Case("zero max turns", _set("rollout.max_turns=0"), "'rollout.max_turns' must be at least 1"),
    Case("zero new tokens", _set("rollout.max_new_tokens=0"), "'rollout.max_new_tokens' must be at least 1"),
    Case("zero generation batch", _set("rollout.generation_batch_size=0"), "'rollout.generation_batch_size' must be at least 1"),
    Case("negative history window", _set("rollout.history_window=-1"), "'rollout.history_window' must be at least 0"),
    Case("negative env workers", _set("rollout.env_workers=-1"), "'rollout.env_workers' must be at least 0"),
    Case("save every -1 iterations", _set("train.save_every=-1"), "'train.save_every' must be at least 0"),
    Case("negative eval episodes", _set("train.eval_episodes=-2"), "'train.eval_episodes' must be at least 0"),
    Case("zero learning rate", _set("algorithm.lr=0"), "'algorithm.lr' must be in (0, 10]"),
    Case("negative learning rate", _set("algorithm.lr=-1e-5"), "'algorithm.lr' must be in (0, 10]"),
    Case("discount above 1", _set("algorithm.gamma=1.5"), "'algorithm.gamma' must be in [0, 1]"),
    Case("negative KL coefficient", _set("algorithm.kl_coef=-0.1"), "'algorithm.kl_coef' must be at least 0"),
    Case("zero clip range", _set("algorithm.clip_eps=0"), "'algorithm.clip_eps' must be greater than 0"),
    Case("PPO critic epochs 0", _set("algorithm.critic_epochs=0", algo="ppo"), "'algorithm.critic_epochs' must be at least 1"),
    Case("PPO GAE level misspelt", _set("algorithm.gae_level=word", algo="ppo"), "'algorithm.gae_level' must be one of turn, token"),
    Case("SAPO squash misspelt", _set("algorithm.value_squash=sigmoid"), "'algorithm.value_squash' must be one of clip, clip_st, tanh"),
    Case("staleness past the cap", _set("rollout.max_staleness=9"), "'rollout.max_staleness' must be"),
    Case("stale episodes, decoupled, no cap", _set("rollout.max_staleness=1"), "needs algorithm.tis_cap > 0"),
    Case("stale episodes with vLLM asleep", _set("rollout.max_staleness=1", "algorithm.tis_cap=2", "model.vllm_sleep=true"),
         "cannot be combined with model.vllm_sleep"),
    Case("head-only value steps under LoRA", _set("algorithm.value_head_steps=64", "model.lora_rank=8"),
         "algorithm.value_head_steps and value_head_fit=ridge need full fine-tuning in one process"),
    Case("ridge head fit under LoRA", _set("algorithm.value_head_fit=ridge", "model.lora_rank=8"),
         "value_head_fit=ridge need full fine-tuning in one process"),
    Case("head fit misspelt", _set("algorithm.value_head_fit=lbfgs"), "'algorithm.value_head_fit' must be one of adam, ridge"),
    Case("empty head window", _set("algorithm.critic_head_window=0", algo="ppo"), "'algorithm.critic_head_window' must be at least 1"),
    Case("off-policy mode misspelt", _set("algorithm.off_policy=importance"), "'algorithm.off_policy' must be one of decoupled, behaviour"),
    Case("negative LoRA rank", _set("model.lora_rank=-4"), "'model.lora_rank' must be at least 0"),
    Case("LoRA dropout of 1", _set("model.lora_dropout=1"), "'model.lora_dropout' must be in [0, 1)"),
    Case("unknown dtype", _set("model.dtype=float8"), "'model.dtype' must be one of"),
    Case("unknown generation dtype", _set("rollout.generation_dtype=int4"), "'rollout.generation_dtype' must be one of"),
    Case("unknown device name", _set("model.device=gpu"), "'model.device' must be auto, cpu, cuda or cuda:N"),
    Case("action tag that is not a tag", _set("rollout.action_tag=<act>"), "'rollout.action_tag' must be a tag name"),
    Case("think with constrained actions", _set("rollout.think=true", "rollout.action_mode=constrained"),
         "rollout.think cannot be combined"),
    Case("tasks per iteration of 10^12", _set("rollout.tasks_per_iteration=1000000000000"),
         "'rollout.tasks_per_iteration' must be at most 100000"),
    Case("LoRA rank of 10^9", _set("model.lora_rank=1000000000"), "'model.lora_rank' must be at most 65536"),
    Case("prompt limit too small for a prompt", _set("rollout.max_prompt_tokens=16"),
         "'rollout.max_prompt_tokens' must be at least 256"),
    Case("seed of 2^64", _set("train.seed=18446744073709551616"), "'train.seed' must be in [0, 9223372036854775807]"),
    Case("negative seed", _set("train.seed=-1"), "'train.seed' must be in [0, 9223372036854775807]"),
    Case("device mps on Linux", _set("model.device=mps"), "is mps, which exists only on macOS"),
    Case("eval episodes of 10^12", ("eval", *TINY, "--episodes", "1000000000000"), "--episodes must be at most 1000000"),
    Case("play with seed -1", ("play", "keydoor", "--seed", "-1"), "--seed must be in [0, 9223372036854775807]"),
    Case("unknown backend (option)", _run("--backend", "vlm"), "must be one of auto, hf, vllm, not 'vlm'"),
    Case("unknown backend (--set)", ("eval", *TINY, "--set", "rollout.backend=tgi"), "must be one of auto, hf, vllm"),
    # --- env options -----------------------------------------------------------------------------
    Case("env option out of range", _set("env.kwargs={n_rooms: 99}") + ("--run-dir", "{tmp}/run"),
         "Env 'agentrl/KeyDoor-v0' rejected its options"),
    Case("env option unknown", _set("env.kwargs={colour: blue}") + ("--run-dir", "{tmp}/run"),
         "Env 'agentrl/KeyDoor-v0' rejected its options"),
    Case("split that does not exist", _set("env.train_split=nosplit") + ("--run-dir", "{tmp}/run"),
         "split must be one of"),
    Case("split that does not exist in play", ("play", "keydoor", "--split", "nosplit"), "split must be one of"),
    # --- models and backends ---------------------------------------------------------------------
    Case("model path that does not exist", ("run", "sapo", "--model", "/no/such/model"), "Model path '/no/such/model' does not exist"),
    Case("relative model path without ./", ("run", "sapo", "--model", "tests/no_such_checkpoint"),
         "Model path 'tests/no_such_checkpoint' does not exist"),
    Case("deep path that is not a hub id", ("run", "sapo", "--model", "runs/x/checkpoints/iter_9"), "does not exist"),
    Case("name that is not a model", ("run", "sapo", "--model", "not-a-model-or-alias"), "Unknown model 'not-a-model-or-alias'"),
    Case("hub id neither cached nor reachable", ("run", "sapo", "--model", "nobody-here/no-such-model"),
         "is not a local folder and not in the local hub cache", env=(("HF_HUB_OFFLINE", "1"),)),
    Case("model folder without config.json", ("run", "sapo", "--model", "{tmp}/folder"), "has no config.json",
         files=(("folder/weights.bin", b"\0"),)),
    Case("model file that is not GGUF", ("run", "sapo", "--model", "{tmp}/model.bin"), "is a file but not a .gguf file",
         files=(("model.bin", b"\0"),)),
    Case("truncated model.safetensors", ("run", "sapo", "--model", "{tmp}/m"), "model.safetensors' is truncated",
         files=(("m/config.json", TINY_CONFIG), ("m/model.safetensors", _safetensors()[:-8]))),
    Case("corrupt tokenizer.json", ("run", "sapo", "--model", "{tmp}/m"), "tokenizer.json' is not valid JSON (line 1",
         files=(("m/config.json", TINY_CONFIG), ("m/model.safetensors", _safetensors()),
                ("m/tokenizer.json", '{"version": "1.0", "model": {'))),
    Case("random bytes named .gguf", ("run", "sapo", "--model", "{tmp}/model.gguf"), "is not a GGUF file",
         files=(("model.gguf", bytes(range(7, 250, 3))),)),
    Case("vLLM asked for a model its CPU attention cannot run", _run("--backend", "vllm"),
         "rollout.backend=vllm cannot run model 'tiny'"),
    Case("vLLM asked for a folder saved from a tiny run", ("run", "sapo", "--model", "{tmp}/ckpt", "--backend", "vllm"),
         "its attention head size is 16", files=(("ckpt/config.json", TINY_CONFIG),)),
    # --- output paths ----------------------------------------------------------------------------
    Case("run dir is a file", _run("--run-dir", "{tmp}/file"), "it is a file, not a folder", files=(("file", "x"),)),
    Case("run dir inside a file", _run("--run-dir", "{tmp}/file/run"), "is a file, not a folder", files=(("file", "x"),)),
    Case("resume without a run dir", _run("--resume"), "--resume needs the run directory"),
    Case("eval output is a folder", ("eval", *TINY, "-o", "{tmp}/out"), "it is a folder; name a file",
         files=(("out", None),)),
    Case("eval output inside a file", ("eval", *TINY, "-o", "{tmp}/file/eps.jsonl"), "is a file, not a folder",
         files=(("file", "x"),)),
    Case("demos output is a folder", ("demos", *TINY, "--episodes", "2", "-o", "{tmp}/out"), "it is a folder; name a file",
         files=(("out", None),)),
    Case("sft output is a file", ("sft", *TINY, "--demos", "{tmp}/d.jsonl", "-o", "{tmp}/file"), "it is a file, not a folder",
         files=(("file", "x"), ("d.jsonl", DEMO_LINE + "\n"))),
    Case("sft output not empty", ("sft", *TINY, "--demos", "{tmp}/d.jsonl", "-o", "{tmp}/full"), "is not empty",
         files=(("full/x", "x"), ("d.jsonl", DEMO_LINE + "\n"))),
    Case("report output is a file", ("report", "{tmp}/runs", "-o", "{tmp}/file"), "it is a file, not a folder",
         files=(("file", "x"), ("runs", None))),
    Case("bench output is a file", ("bench", *TINY, "--seeds", "1", "-o", "{tmp}/file"), "it is a file, not a folder",
         files=(("file", "x"),)),
    # --- run folders and what a run may be told (issue 28) ----------------------------------------
    Case("run dir holding a project's own files", _run("--run-dir", "{tmp}/project"),
         "it holds files that are not an agentrl run (README, config.yaml)", files=PROJECT),
    Case("resume of a folder that is not a run", _run("--run-dir", "{tmp}/project", "--resume"),
         "it holds files that are not an agentrl run", files=PROJECT),
    Case("run dir given as an empty string", _run("--run-dir", ""), "--run-dir is empty (an unset shell variable?)"),
    Case("train.run_dir set to an empty string", _set("train.run_dir="), "Config key 'train.run_dir' is empty"),
    Case("bench output holding other files", ("bench", *TINY, "--seeds", "1", "-o", "{tmp}/project"),
         "it holds files that are not a bench's output", files=PROJECT),
    Case("bench output given as an empty string", ("bench", *TINY, "-o", ""), "--out is empty"),
    Case("suite output holding other files", ("suite", "--seeds", "1", "-o", "{tmp}/project"),
         "it holds files that are not a suite's output", files=PROJECT),
    Case("suite resumed with other settings", ("suite", "--seeds", "1", "--probes", "chain-d1", "-o", "{tmp}/s"),
         "This suite folder was made with overrides ['algorithm.lr=1e-3'], not []",
         files=(("s/suite.json", json.dumps({"probes": [], "algos": ["sapo"], "settings": {
             "model": "tiny", "seeds": 1, "first_seed": 0, "iterations": 20, "trajectories": 16,
             "eval_episodes": 32, "overrides": ["algorithm.lr=1e-3"]}})),)),
    Case("report output holding other files", ("report", "{tmp}/runs", "-o", "{tmp}/project"),
         "it holds files that are not a report", files=(*PROJECT, ("runs", None))),
    Case("sft output given as an empty string", ("sft", *TINY, "--demos", "{tmp}/d.jsonl", "-o", ""), "--output is empty",
         files=(("d.jsonl", DEMO_LINE + "\n"),)),
    Case("demos output given as an empty string", ("demos", *TINY, "-o", ""), "--output is empty"),
    Case("--set algo contradicting the command", _set("algo=ppo"), "contradicts the command's algorithm sapo"),
    Case("--set algo in a bench", ("bench", *TINY, "--set", "algo=ppo", "-o", "{tmp}/bench"), "is not used by a bench"),
    Case("--set comes after --iterations", _run("--iterations", "3", "--set", "train.iterations=0"),
         "'train.iterations' must be at least 1, not 0"),
    Case("infinite learning rate", _set("algorithm.lr=.inf"), "'algorithm.lr' must be a finite number in (0, 10], not inf"),
    Case("learning rate that overflows to inf", _set("algorithm.lr=1e400"), "'algorithm.lr' must be a finite number"),
    Case("learning rate past float32", _set("algorithm.lr=1e300"), "'algorithm.lr' must be in (0, 10], not 1e+300"),
    Case("infinite temperature", _set("rollout.temperature=.inf"), "'rollout.temperature' must be a finite number"),
    Case("NaN clip range", _set("algorithm.clip_eps=.nan"), "'algorithm.clip_eps' must be a finite number greater than 0, not nan"),
    Case("infinite rate in a config file", _run("--config", "{tmp}/c.yaml"), "'algorithm.lr' must be a finite number",
         files=(("c.yaml", "algorithm:\n  lr: .inf\n"),)),
    Case("non-finite handling misspelt", _set("algorithm.nonfinite=ignore"), "must be one of stop, skip"),
    # --- counts on the command line --------------------------------------------------------------
    Case("eval zero episodes", ("eval", *TINY, "--episodes", "0"), "--episodes must be at least 1"),
    Case("eval negative episodes", ("eval", *TINY, "--episodes", "-3"), "--episodes must be at least 1, not -3"),
    Case("demos zero episodes", ("demos", *TINY, "--episodes", "0", "-o", "{tmp}/d.jsonl"), "--episodes must be at least 1"),
    Case("demos noise of 1.5", ("demos", *TINY, "--expert-noise", "1.5", "-o", "{tmp}/d.jsonl"), "--expert-noise must be in [0, 1)"),
    Case("sft zero epochs", **_sft(DEMO_LINE + "\n", "--epochs", "0"), expect="'sft.epochs' must be at least 1"),
    Case("sft zero learning rate", **_sft(DEMO_LINE + "\n", "--lr", "0"), expect="'sft.lr' must be in (0, 10]"),
    Case("report negative traces", ("report", "{tmp}/runs", "--traces", "-1"), "--traces cannot be negative",
         files=(("runs", None),)),
    Case("bench zero seeds", ("bench", *TINY, "--seeds", "0", "-o", "{tmp}/bench"), "at least 1"),
    # --- demonstration files ---------------------------------------------------------------------
    Case("demo file missing", **_sft(None), expect="Cannot read demonstrations"),
    Case("demo file is a folder", _sft(None, name="folder")["argv"], "is a folder; pass a JSONL file",
         files=(("folder", None),)),
    Case("demo file is binary", **_sft(b"\x89PNG\r\n\x1a\n\xff\xfe\x00"), expect="is not UTF-8 text"),
    Case("demo file with a NUL byte", **_sft("{}\0\n"), expect="holds a NUL byte"),
    Case("demo file with a number per line", **_sft("1\n2\n"), expect="demos.jsonl:1 must be a JSON object"),
    Case("demo line that is not JSON", **_sft(DEMO_LINE + "\n{oops\n"), expect="demos.jsonl:2 is not valid JSON"),
    Case("demo line without a reply", **_sft(json.dumps({"prompt": "p"}) + "\n"), expect="lacks 'reply'"),
    Case("demo reply that is a number", **_sft(json.dumps({"prompt": "p", "reply": 5}) + "\n"),
         expect="'reply' must be a non-empty string"),
    Case("demo messages that are a string", **_sft(json.dumps({"messages": "hi", "reply": "r"}) + "\n"),
         expect="'messages' must be a non-empty list"),
    Case("demo message without content", **_sft(json.dumps({"messages": [{"role": "user"}], "reply": "r"}) + "\n"),
         expect="messages[0] must be an object with string 'role' and 'content'"),
    Case("demo expert flag that is a word", **_sft(json.dumps({"prompt": "p", "reply": "r", "expert": "yes"}) + "\n"),
         expect="'expert' must be true or false"),
    Case("demo file with no turns", **_sft("\n\n"), expect="hold no turns"),
    Case("demo message with an unknown role", **_sft(json.dumps({"messages": [{"role": "wizard", "content": "hi"}],
                                                                 "reply": "r"}) + "\n"),
         expect="demos.jsonl:1: messages[0] has role 'wizard'; roles are system, user, assistant, tool"),
    Case("demo reply of only spaces", **_sft(json.dumps({"prompt": "p", "reply": "   "}) + "\n"),
         expect="demos.jsonl:1: 'reply' holds only whitespace"),
    Case("demo with a 1 MB prompt", **_sft(json.dumps({"prompt": "x" * 1_048_576, "reply": "r"}) + "\n"),
         expect="demos.jsonl:1 holds 1,048,577 characters of prompt and reply"),
    Case("bench into a folder whose bench.json is a list", ("bench", *TINY, "--seeds", "1", "-o", "{tmp}/b"),
         "bench.json' is not an agentrl bench manifest", files=(("b/bench.json", "[]"),)),
    # --- report inputs ---------------------------------------------------------------------------
    Case("report of a run whose metrics hold only the iteration", ("report", "{tmp}/r1", "-o", "{tmp}/rep"),
         "metrics.jsonl' is not an agentrl metrics log",
         files=(("r1/config.yaml", RUN_CONFIG), ("r1/metrics.jsonl", '{"iteration": 1}\n'))),
    Case("report of a run config with only algo", ("report", "{tmp}/r1", "-o", "{tmp}/rep"),
         "config.yaml' is not an agentrl run config (its sections env, model, rollout, train, algorithm are missing",
         files=(("r1/config.yaml", "algo: sapo\n"), ("r1/metrics.jsonl", METRICS_LINE))),
    Case("report of a bench whose bench.json is a list", ("report", "{tmp}/b", "-o", "{tmp}/rep"),
         "bench.json' is not an agentrl bench manifest", files=(("b/bench.json", "[]"),)),
    Case("report of a bench.json holding runs: 5", ("report", "{tmp}/b", "-o", "{tmp}/rep"),
         "bench.json' is not an agentrl bench manifest", files=(("b/bench.json", '{"runs": 5}'),)),
]


@dataclass
class Outcome:
    exit_code: int
    stdout: str
    stderr: str
    traceback: bool  # a traceback anywhere: in the output, or an exception escaping the command


@contextlib.contextmanager
def forgetting_user_envs(folder: Path) -> Iterator[None]:
    """Undo what importing a user's env module from ``folder`` did to this process (gymnasium ids,
    agentrl's record of imported modules, the modules themselves), so a case or test leaves the
    registry as it found it."""
    import gymnasium as gym

    from agentrl.envs import modules as env_modules
    from agentrl.envs.modules import ensure_builtin_envs_registered

    ensure_builtin_envs_registered()  # agentrl's own ids stay, even when a case registers them first
    ids, imported, modules = set(gym.registry), dict(env_modules._imported), set(sys.modules)
    try:
        yield
    finally:
        for env_id in set(gym.registry) - ids:
            del gym.registry[env_id]
        env_modules._imported.clear()
        env_modules._imported.update(imported)
        for name in set(sys.modules) - modules:
            if (getattr(sys.modules[name], "__file__", None) or "").startswith(str(folder)):
                del sys.modules[name]


def run_case(case: Case, tmp: Path) -> Outcome:
    """Run one case in this process (typer's CliRunner: no interpreter start per case)."""
    import traceback

    from typer.testing import CliRunner

    from agentrl.cli import app

    argv = case.materialise(tmp)
    runner = CliRunner(env=dict(case.env) or None)
    sys.path.insert(0, str(tmp))  # env modules a case writes are importable, as on PYTHONPATH
    try:
        with forgetting_user_envs(tmp):
            result = runner.invoke(app, argv, prog_name="agentrl")
    finally:
        sys.path.remove(str(tmp))
    escaped = result.exception is not None and not isinstance(result.exception, SystemExit)
    text = result.stdout + result.stderr
    if escaped:
        text += "".join(traceback.format_exception(result.exception))
    return Outcome(result.exit_code, result.stdout, result.stderr, escaped or "Traceback" in text)
