"""Run configuration: dataclasses, YAML files and ``--set key=value`` overrides.

A run is described by one :class:`RunConfig`. It can be written as YAML (the same nesting as the
dataclasses) and adjusted on the command line with dotted keys, e.g.
``--set algorithm.kl_coef=0 --set rollout.action_mode=constrained``. Values are parsed as YAML
scalars and checked against the field's type, so a typo fails at once with one sentence instead
of silently doing nothing.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from agentrl.algorithms import AlgoConfig, get_algorithm
from agentrl.errors import UserError
from agentrl.rollout import RolloutConfig

#: Split names of the built-in envs: (train, eval). Other envs get no split argument.
DEFAULT_SPLITS: dict[str, tuple[str, str]] = {
    "agentrl/KeyDoor-v0": ("train", "eval"),
    "agentrl/ALFWorld-v0": ("train", "eval_seen"),
    "agentrl/WebShop-v0": ("train", "eval"),
}


@dataclass
class EnvConfig:
    id: str = "keydoor"
    kwargs: dict[str, Any] = field(default_factory=dict)  # passed to the env's constructor
    train_split: str | None = "auto"  # "auto": the env's own name for it; None: no split argument
    eval_split: str | None = "auto"


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


@dataclass
class TrainConfig:
    iterations: int = 10
    seed: int = 0
    eval_every: int = 0  # iterations between evals (0: only at the end if eval_episodes > 0)
    eval_episodes: int = 0
    eval_greedy: bool = True
    save_every: int = 5
    samples_per_iteration: int = 2  # trajectories written as text each iteration
    run_dir: str | None = None  # default: runs/<algo>-<env>-<time>


@dataclass
class SFTConfig:
    """``agentrl sft``: supervised warm start on demonstrations (see agentrl/sft.py)."""

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
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise UserError(f"Cannot read config file '{path}': {exc.strerror or exc}.") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserError(f"Config file '{path}' is not valid YAML ({str(exc).splitlines()[0]}).") from exc
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
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
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
        tree.setdefault("env", {})
        tree["env"] = {**tree["env"], "id": env} if isinstance(tree["env"], dict) else {"id": env}
    if model is not None:
        tree["model"] = {**(tree.get("model") or {}), "name": model}
    for text in overrides or []:
        path, value = parse_override(text)
        _set_path(tree, path, value)
    return from_dict(tree)


def from_dict(tree: dict[str, Any]) -> RunConfig:
    algo_name = str(tree.get("algo", RunConfig.algo))
    algo_cls = get_algorithm(algo_name)
    sections = {
        "env": EnvConfig, "model": ModelConfig, "rollout": RolloutConfig, "train": TrainConfig,
        "algorithm": algo_cls.config_class, "sft": SFTConfig,
    }
    unknown = set(tree) - set(sections) - {"algo"}
    if unknown:
        raise UserError(f"Unknown config section '{sorted(unknown)[0]}'; sections are: algo, {', '.join(sections)}.")
    built = {name: _build(cls, tree.get(name) or {}, name) for name, cls in sections.items()}
    return RunConfig(algo=algo_name, **built)


def _build(cls: type, values: Any, where: str) -> Any:
    if not isinstance(values, dict):
        raise UserError(f"Config section '{where}' must be a mapping, not {values!r}.")
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
            raise UserError(f"Config key '{key}' must be one of {', '.join(map(str, args))}, not {value!r}.")
        return value
    if hint is Any:
        return value
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise UserError(f"Config key '{key}' must be a mapping, not {value!r}.")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise UserError(f"Config key '{key}' must be true or false, not {value!r}.")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"Config key '{key}' must be an integer, not {value!r}.")
        return value
    if hint is float:
        if isinstance(value, str):  # YAML 1.1 reads "1e-5" (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UserError(f"Config key '{key}' must be a number, not {value!r}.")
        return float(value)
    if hint is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise UserError(f"Config key '{key}' must be a string, not {value!r}.")
        return str(value)
    return value


def save_yaml(config: RunConfig, path: Path) -> None:
    path.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
