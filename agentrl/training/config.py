"""Run configuration: dataclasses, YAML files and ``--set key=value`` overrides.

A run is described by one :class:`RunConfig`. It can be written as YAML (the same nesting as the
dataclasses) and adjusted on the command line with dotted keys, e.g.
``--set algorithm.kl_coef=0 --set rollout.action_mode=constrained``. Values are parsed as YAML
scalars and checked against the field's type, so a typo fails at once with one sentence instead
of silently doing nothing.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from agentrl.algorithms import AlgoConfig, algorithm_name, get_algorithm
from agentrl.errors import UserError, shown
from agentrl.rollout.engine import RolloutConfig

#: Split names of the built-in envs: (train, eval). Other envs get no split argument.
DEFAULT_SPLITS: dict[str, tuple[str, str]] = {
    "agentrl/KeyDoor-v0": ("train", "eval"),
    "agentrl/ALFWorld-v0": ("train", "eval_seen"),
    "agentrl/WebShop-v0": ("train", "eval"),
    "agentrl/Chain-v0": ("train", "eval"),
    "agentrl/Locks-v0": ("train", "eval"),
    "agentrl/Memory-v0": ("train", "eval"),
    "agentrl/Corridor-v0": ("train", "eval"),
}


@dataclass
class EnvConfig:
    id: str = "keydoor"
    kwargs: dict[str, Any] = field(default_factory=dict)  # passed to the env's constructor
    train_split: str | None = "auto"  # "auto": the env's own name for it; None: no split argument
    eval_split: str | None = "auto"
    imports: list[str] = field(default_factory=list)  # your modules that register envs, imported first


@dataclass
class ModelConfig:
    name: str = "embedded"  # alias, hub id, folder, .gguf file, "embedded" or "tiny"
    dtype: str = "auto"  # float32 on CPU, bfloat16 on GPU
    device: str = "auto"
    lora_rank: int = 0  # > 0 trains LoRA adapters instead of every weight
    lora_alpha: float = 32.0
    lora_dropout: float = 0.0
    gradient_checkpointing: bool = False
    autocast: Literal["none", "bf16"] = "none"  # bf16: bf16 matmuls, fp32 weights + optimizer state
    reference_offload: bool = False  # GPU: the frozen reference waits on the CPU between its passes
    vllm_gpu_memory_utilization: float = 0.3  # vLLM on a GPU: share for its weights + KV cache
    vllm_kv_cache_gib: float = 2.0  # vLLM on CPU: KV cache size (VLLM_CPU_KVCACHE_SPACE)
    vllm_sync_check: bool = True  # after every weight sync, prove on a probe that vLLM has the weights
    vllm_sync_tolerance: float | None = None  # relative probe gap allowed; None: by engine dtype
    #: vLLM on a GPU: the engine sleeps (weights offloaded to the CPU, KV cache freed) during the
    #: update and wakes for the next rollout; ignored on CPU
    vllm_sleep: bool = False


@dataclass
class TrainConfig:
    iterations: int = 10
    seed: int = 0
    eval_every: int = 0  # iterations between evals (0: only at the end if eval_episodes > 0)
    #: also evaluate the starting model before iteration 1 (a metrics record with iteration 0), so
    #: every run's curve starts from its own measured start (a resumed run does not redo it)
    eval_at_start: bool = False
    eval_episodes: int = 0
    eval_greedy: bool = True
    save_every: int = 5
    samples_per_iteration: int = 2  # trajectories written as text each iteration
    run_dir: str | None = None  # default: runs/<algo>-<env>-<time>
    loggers: list[str] = field(default_factory=list)  # tensorboard, wandb (agentrl/training/loggers.py)
    #: under torchrun: none (every rank a full copy, gradients all-reduced) or fsdp (weights,
    #: gradients and optimizer state sharded over the ranks; agentrl/parallel/fsdp.py)
    parallel: str = "none"


@dataclass
class SFTConfig:
    """``agentrl sft``: supervised warm start on demonstrations (see agentrl/training/sft.py)."""

    epochs: int = 2
    lr: float = 5e-5
    batch_turns: int = 16  # turns per optimizer step
    micro_batch_tokens: int = 4096
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0
    include_noise: bool = False  # also train on the random (noise) turns of noisy demos
    eval_episodes: int = 32
    seed: int = 0


@dataclass
class RunConfig:
    algo: str = "sapo"
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    algorithm: AlgoConfig = field(default_factory=AlgoConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --- building -------------------------------------------------------------------------------------


def load_yaml(path: str | Path) -> dict[str, Any]:
    """A config file as a tree of sections (agentrl.rundir.yaml_input refuses duplicate keys, alias
    bombs and bytes that are not UTF-8, each in one sentence)."""
    from agentrl.rundir.yaml_input import read_yaml_file

    data = read_yaml_file(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"Config file '{path}' must hold a mapping of sections, not {type(data).__name__}.")
    return data


def parse_override(text: str) -> tuple[list[str], Any]:
    """``a.b=value`` -> (["a", "b"], parsed value)."""
    if "=" not in text:
        raise UserError(f"Malformed --set '{text}': expected key=value, e.g. --set algorithm.lr=1e-5.")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise UserError(f"Malformed --set '{text}': the key before '=' is empty or has an empty part.")
    from agentrl.rundir.yaml_input import YAMLSyntaxError, parse_yaml

    try:
        value = parse_yaml(raw, f"--set '{key}'") if raw.strip() else ""
    except YAMLSyntaxError:
        value = raw
    return key.split("."), value


def _set_path(tree: dict[str, Any], path: list[str], value: Any) -> None:
    node = tree
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key not in ("kwargs",):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def build_config(algo: str | None = None, env: str | None = None, model: str | None = None,
                 config_path: str | Path | None = None, overrides: list[str] | None = None,
                 base: dict[str, Any] | None = None) -> RunConfig:
    """Defaults < ``base`` < YAML file < explicit ``algo``/``env``/``model`` < ``--set`` overrides."""
    tree: dict[str, Any] = dict(base or {})
    if config_path is not None:
        tree = _merge(tree, load_yaml(config_path))
    if algo is not None:
        tree["algo"] = algo
    if env is not None:
        tree["env"] = {**_section(tree, "env"), "id": env}
    if model is not None:
        tree["model"] = {**_section(tree, "model"), "name": model}
    for text in overrides or []:
        path, value = parse_override(text)
        if path == ["algo"] and algo is not None:
            _check_same_algorithm(algo, value)
        _set_path(tree, path, value)
    return from_dict(tree)


def _check_same_algorithm(algo: str, value: Any) -> None:
    """``agentrl run sapo --set algo=ppo`` names two algorithms; training either one silently
    would be wrong for the other, so a ``--set algo`` other than the command's is refused."""
    if str(value).lower() != algo.lower():
        raise UserError(f"--set algo={value} contradicts the command's algorithm {algo}; "
                        f"name the algorithm once, as the command's argument (agentrl run {value}).")


def _section(tree: dict[str, Any], name: str) -> dict[str, Any]:
    """``tree[name]`` as a mapping (empty when absent); ``model: tiny`` where the ``model``
    section belongs is one sentence, not a crash while the command line's values are added."""
    value = tree.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"Config section '{name}' must be a mapping, not {shown(value)}.")
    return value


def from_dict(tree: dict[str, Any]) -> RunConfig:
    algo_name = algorithm_name(str(tree.get("algo", RunConfig.algo)))
    algo_cls = get_algorithm(algo_name)
    sections = {
        "env": EnvConfig, "model": ModelConfig, "rollout": RolloutConfig, "train": TrainConfig,
        "algorithm": algo_cls.config_class, "sft": SFTConfig,
    }
    unknown = set(tree) - set(sections) - {"algo"}
    if unknown:
        raise UserError(f"Unknown config section '{sorted(unknown)[0]}'; sections are: algo, {', '.join(sections)}.")
    built = {name: _build(cls, tree.get(name) or {}, name) for name, cls in sections.items()}
    config = RunConfig(algo=algo_name, **built)
    validate(config)  # every number finite and in range (RANGES)
    return config


# --- ranges ---------------------------------------------------------------------------------------
#
# Types are checked while a section is built; these are the values a type admits but a run
# cannot use (0 iterations trains nothing and writes NaN, 0 micro-batch tokens divides by
# zero after a full rollout). Checking them here, when the config is made, fails before any
# model, env or run directory exists.


@dataclass(frozen=True)
class Range:
    """Allowed interval of a numeric setting; ``None`` bounds are open-ended.

    ``low``/``high`` say what the setting means (a probability is in [0, 1]); ``cap`` is a sanity
    limit on a count that has no natural top, far above any real run, so that a typo like
    ``tasks_per_iteration=10^12`` is one sentence instead of a MemoryError an hour in.
    Every admitted value is finite.
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False  # True: low itself is not allowed (e.g. a learning rate > 0)
    high_open: bool = False
    cap: int | None = None

    def capped(self, cap: int) -> Range:
        """This range with a sanity limit ``cap``."""
        return dataclasses.replace(self, cap=cap)

    def admits(self, value: float) -> bool:
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        if self.cap is not None and value > self.cap:
            return False
        return not (self.high is not None and (value > self.high or (self.high_open and value == self.high)))

    def describe(self, value: float | None = None) -> str:
        """The rule ``value`` breaks (the whole rule when ``value`` is None)."""
        if isinstance(value, float) and not math.isfinite(value):
            return f"a finite number {self.describe()}"
        if self.cap is not None and value is not None and value > self.cap:
            return f"at most {_number(self.cap)}"
        if self.low is not None and self.high is not None:
            return (f"in {'(' if self.low_open else '['}{_number(self.low)}, "
                    f"{_number(self.high)}{')' if self.high_open else ']'}")
        if self.low is not None:
            rule = f"{'greater than' if self.low_open else 'at least'} {_number(self.low)}"
            return f"{rule} and at most {_number(self.cap)}" if self.cap is not None and value is None else rule
        return f"{'less than' if self.high_open else 'at most'} {_number(self.high)}"


def _number(bound: float) -> str:
    """A bound as a person writes it: integers in full (a seed's top is 9223372036854775807)."""
    if isinstance(bound, int) or float(bound).is_integer():
        return str(int(bound))
    return f"{bound:g}"


POSITIVE = Range(0, low_open=True)
#: A learning rate: above 0, and at most 10 (far past any rate that trains; 1e300 would overflow
#: the optimizer's float32 arithmetic into a traceback)
RATE = Range(0, 10, low_open=True)
AT_LEAST_ONE = Range(1)
NON_NEGATIVE = Range(0)
UNIT = Range(0, 1)
#: Seeds: what ``torch.manual_seed`` and Python's ``random`` take, with room for ``seed + rank``.
SEED = Range(0, 2**63 - 1)
#: Counts of things (iterations, episodes, turns): far above any run, below a MemoryError.
MANY = 10_000_000
#: Token counts: a million-token context is beyond every model agentrl runs.
TOKENS = 1_048_576

#: ``section.key`` -> allowed range, the one place the numeric settings' rules live (docs/cli.md
#: lists them). Keys a section does not have (another algorithm's) are skipped; every int and
#: float setting of every section has an entry (tests/test_input_checks.py).
RANGES: dict[str, Range] = {
    "model.lora_rank": NON_NEGATIVE.capped(65_536), "model.lora_alpha": POSITIVE,
    "model.lora_dropout": Range(0, 1, high_open=True),
    "model.vllm_gpu_memory_utilization": Range(0, 1, low_open=True), "model.vllm_kv_cache_gib": POSITIVE.capped(65_536),
    "model.vllm_sync_tolerance": NON_NEGATIVE,
    "rollout.tasks_per_iteration": AT_LEAST_ONE.capped(100_000), "rollout.max_turns": AT_LEAST_ONE.capped(100_000),
    "rollout.history_window": NON_NEGATIVE.capped(100_000), "rollout.invalid_action_penalty": NON_NEGATIVE,
    "rollout.temperature": NON_NEGATIVE,  # 0: greedy rollouts (scored at T=1)
    "rollout.top_p": Range(0, 1, low_open=True),
    "rollout.max_new_tokens": AT_LEAST_ONE.capped(TOKENS),
    # the smallest that holds a system prompt, the task and one observation (the built-in envs'
    # first prompts are 90-140 tokens); below it a prompt cannot be shortened to fit
    "rollout.max_prompt_tokens": Range(256).capped(TOKENS),
    "rollout.generation_batch_size": AT_LEAST_ONE.capped(1_000_000), "rollout.env_workers": NON_NEGATIVE.capped(4096),
    "rollout.max_staleness": NON_NEGATIVE.capped(8),
    "rollout.env_step_timeout_s": NON_NEGATIVE,  # 0: no step timeout
    "train.iterations": AT_LEAST_ONE.capped(MANY), "train.seed": SEED,
    "train.eval_every": NON_NEGATIVE.capped(MANY), "train.eval_episodes": NON_NEGATIVE.capped(1_000_000),
    "train.save_every": NON_NEGATIVE.capped(MANY),  # 0: a checkpoint only at the end
    "train.samples_per_iteration": NON_NEGATIVE.capped(1_000_000),
    "algorithm.lr": RATE, "algorithm.epochs": AT_LEAST_ONE.capped(100_000),
    "algorithm.minibatch_turns": AT_LEAST_ONE.capped(MANY),
    "algorithm.micro_batch_tokens": AT_LEAST_ONE.capped(1_000_000_000), "algorithm.clip_eps": POSITIVE,
    "algorithm.kl_coef": NON_NEGATIVE, "algorithm.entropy_coef": NON_NEGATIVE,
    "algorithm.max_grad_norm": POSITIVE, "algorithm.gamma": UNIT, "algorithm.lam": UNIT,
    "algorithm.weight_decay": NON_NEGATIVE, "algorithm.value_coef": NON_NEGATIVE, "algorithm.q_coef": NON_NEGATIVE,
    "algorithm.value_clip": POSITIVE, "algorithm.critic_lr": RATE,
    "algorithm.critic_epochs": AT_LEAST_ONE.capped(100_000),
    "algorithm.group_size": Range(2).capped(10_000),
    "algorithm.tis_cap": NON_NEGATIVE,  # 0: no truncated importance-sampling correction
    "algorithm.value_warmup_iterations": NON_NEGATIVE.capped(MANY), "algorithm.value_warmup_lr": RATE,
    "algorithm.value_warmup_ev": Range(high=1),  # explained variance: 1 at best
    "algorithm.value_temperature": POSITIVE, "algorithm.value_lr": RATE,
    "algorithm.critic_head_lr": RATE, "algorithm.value_epochs": NON_NEGATIVE.capped(100_000),
    "algorithm.value_epoch_lr": RATE, "algorithm.value_head_lr": RATE, "algorithm.critic_head_window": AT_LEAST_ONE.capped(10_000),
    "algorithm.value_head_steps": NON_NEGATIVE.capped(100_000), "algorithm.critic_head_steps": NON_NEGATIVE.capped(100_000), "algorithm.value_head_window": AT_LEAST_ONE.capped(10_000),
    "sft.epochs": AT_LEAST_ONE.capped(100_000), "sft.lr": RATE, "sft.batch_turns": AT_LEAST_ONE.capped(MANY),
    "sft.micro_batch_tokens": AT_LEAST_ONE.capped(1_000_000_000), "sft.max_grad_norm": POSITIVE,
    "sft.weight_decay": NON_NEGATIVE, "sft.eval_episodes": NON_NEGATIVE.capped(1_000_000), "sft.seed": SEED,
}


def check_ranges(config: RunConfig) -> None:
    """Raise :class:`UserError` for the first numeric setting outside its :data:`RANGES` entry."""
    for key, allowed in RANGES.items():
        section, name = key.split(".")
        value = getattr(getattr(config, section), name, None)
        if value is None or isinstance(value, bool):
            continue
        if not allowed.admits(value):
            raise UserError(f"Config key '{key}' must be {allowed.describe(value)}, not {shown(value)}.")


#: Command-line options that are not config keys, ranged the same way.
OPTION_RANGES: dict[str, Range] = {
    "--episodes": AT_LEAST_ONE.capped(1_000_000), "--seed": SEED, "--first-seed": SEED,
    "--seeds": AT_LEAST_ONE.capped(10_000), "--traces": NON_NEGATIVE.capped(1000),
}


def check_option(option: str, value: float) -> None:
    """The rule of :data:`OPTION_RANGES` for a command-line option (``--episodes 0``)."""
    allowed = OPTION_RANGES[option]
    if not allowed.admits(value):
        raise UserError(f"{option} must be {allowed.describe(value)}, not {shown(value)}.")


#: ``section.key`` -> the words it may be (string settings whose typos would otherwise surface late).
CHOICES: dict[str, tuple[str, ...]] = {
    "rollout.backend": ("auto", "hf", "vllm"),
    "algorithm.value_squash": ("clip", "clip_st", "tanh"),
    "algorithm.value_head_fit": ("adam", "ridge"), "algorithm.critic_head_fit": ("adam", "ridge"),
    "algorithm.advantage_turns": ("valid", "all"),
    "algorithm.value_epoch_optimizer": ("own", "shared"),
    "rollout.time_limit": ("auto", "bootstrap", "terminal"),
    "algorithm.gae_level": ("turn", "token"),
    "rollout.history": ("window", "conversation"),
    "algorithm.old_logprob_pass": ("auto", "always"),
    "algorithm.off_policy": ("decoupled", "behaviour"),
    "rollout.list_admissible": ("every", "first", "never"),
    "train.parallel": ("none", "fsdp"),
}

DTYPE_NAMES = ("auto", "float32", "fp32", "bfloat16", "bf16", "float16", "fp16")


def validate(config: RunConfig) -> None:
    """Raise :class:`UserError` for the first setting a run cannot use."""
    check_ranges(config)
    for key, words in CHOICES.items():
        section, name = key.split(".")
        value = getattr(getattr(config, section), name, None)
        if value is not None and value not in words:
            raise UserError(f"Config key '{key}' must be one of {', '.join(words)}, not {shown(value)}.")
    _validate_words(config)


def _validate_words(config: RunConfig) -> None:
    import re

    if any(not isinstance(m, str) or not m.strip() for m in config.env.imports):
        raise UserError(f"Config key 'env.imports' must be a list of module names, not {shown(config.env.imports)}.")
    from agentrl.envs.modules import import_all

    import_all(config.env.imports)
    if not isinstance(config.train.loggers, list):
        raise UserError(f"Config key 'train.loggers' must be a list such as [tensorboard, wandb], not {shown(config.train.loggers)}.")
    from agentrl.training.loggers import check_logger_names

    check_logger_names(config.train.loggers)
    if not str(config.env.id).strip():
        raise UserError("Config key 'env.id' is empty; name an env (keydoor, alfworld, webshop or a gymnasium id).")
    if config.model.dtype not in DTYPE_NAMES:
        raise UserError(f"Config key 'model.dtype' must be one of {', '.join(DTYPE_NAMES)}, not {shown(config.model.dtype)}.")
    if config.rollout.generation_dtype not in (*DTYPE_NAMES, "same"):
        raise UserError(f"Config key 'rollout.generation_dtype' must be one of same, {', '.join(DTYPE_NAMES)}, "
                        f"not {shown(config.rollout.generation_dtype)}.")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", config.rollout.action_tag):
        raise UserError(f"Config key 'rollout.action_tag' must be a tag name (letters, digits, _ . -), "
                        f"not {shown(config.rollout.action_tag)}.")
    device = config.model.device
    if device != "auto" and not re.fullmatch(r"(cpu|cuda|cuda:\d+|mps)", device):
        raise UserError(f"Config key 'model.device' must be auto, cpu, cuda or cuda:N, not {shown(device)}.")
    _check_mps(device)
    if config.rollout.action_mode == "constrained" and config.rollout.think:
        raise UserError("rollout.think cannot be combined with rollout.action_mode=constrained (the reply is the action alone).")
    if config.train.parallel == "fsdp" and getattr(config.algorithm, "value_warmup_iterations", 0) > 0:
        raise UserError("algorithm.value_warmup_iterations is not supported with train.parallel=fsdp yet "
                        "(the value rows are masked on full, unsharded gradients).")
    _check_staleness(config)
    value_head = getattr(config.algorithm, "value_head_steps", 0) > 0 or getattr(config.algorithm, "value_head_fit", "") == "ridge"
    if value_head and (config.model.lora_rank > 0 or config.train.parallel != "none"):
        raise UserError("algorithm.value_head_steps and value_head_fit=ridge need full fine-tuning in one process (the value rows as rows of the output embedding): not with model.lora_rank > 0 or train.parallel=fsdp.")
    from agentrl.parallel.fsdp import check_parallel

    check_parallel(config.train.parallel, config.model.lora_rank, config.model.reference_offload)


def _check_staleness(config: RunConfig) -> None:
    """What asynchronous rollouts (``rollout.max_staleness`` > 0) run with so far."""
    if not isinstance(config.rollout.max_staleness, int) or config.rollout.max_staleness == 0:
        return
    if config.model.vllm_sleep:
        raise UserError("rollout.max_staleness > 0 cannot be combined with model.vllm_sleep: the engine plays the "
                        "next episodes while the trainer updates, so it cannot give its memory to the update.")
    if config.train.parallel != "none":
        raise UserError("rollout.max_staleness > 0 is not supported with train.parallel=fsdp yet; use max_staleness=0.")
    if getattr(config.algorithm, "off_policy", "behaviour") == "decoupled" and getattr(config.algorithm, "tis_cap", 1) == 0:
        raise UserError("rollout.max_staleness > 0 with algorithm.off_policy=decoupled needs algorithm.tis_cap > 0, "
                        "the cap on the behaviour weights pi_old / pi_behaviour (2 is common), or off_policy=behaviour.")


def _check_mps(device: str) -> None:
    """``mps`` is Apple's GPU: on any other machine torch fails deep inside the model load."""
    if device == "mps" and sys.platform != "darwin":
        raise UserError(f"Config key 'model.device' is mps, which exists only on macOS; "
                        f"this machine is {sys.platform}: use auto, cpu or cuda.")


def _build(cls: type, values: Any, where: str) -> Any:
    if not isinstance(values, dict):
        raise UserError(f"Config section '{where}' must be a mapping, not {shown(values)}.")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in values.items():
        if key not in names:
            raise UserError(f"Unknown config key '{where}.{key}'; '{where}' has: {', '.join(sorted(names))}.")
        kwargs[key] = _coerce(value, hints[key], f"{where}.{key}")
    return cls(**kwargs)


def _coerce(value: Any, hint: Any, key: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key)
            except UserError as exc:
                errors.append(exc)
        raise errors[0]
    if origin is Literal:
        if value not in args:
            raise UserError(f"Config key '{key}' must be one of {', '.join(map(str, args))}, not {shown(value)}.")
        return value
    if hint is Any:
        return value
    if origin is list:
        if isinstance(value, str):  # --set env.imports=mymod: one item
            value = [value]
        if not isinstance(value, list):
            raise UserError(f"Config key '{key}' must be a list, not {shown(value)}.")
        return [_coerce(item, args[0], key) for item in value] if args else value
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise UserError(f"Config key '{key}' must be a mapping, not {shown(value)}.")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise UserError(f"Config key '{key}' must be true or false, not {shown(value)}.")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"Config key '{key}' must be an integer, not {shown(value)}.")
        return value
    if hint is float:
        if isinstance(value, str):  # YAML 1.1 reads "1e-5" (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UserError(f"Config key '{key}' must be a number, not {shown(value)}.")
        return float(value)
    if hint is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise UserError(f"Config key '{key}' must be a string, not {shown(value)}.")
        return str(value)
    return value


def save_yaml(config: RunConfig, path: Path) -> None:
    path.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
