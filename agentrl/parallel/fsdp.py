"""``train.parallel: fsdp``: parameters, gradients and optimizer state sharded over torchrun's ranks.

Data parallelism (the default under torchrun) keeps a full copy of weights, gradients and AdamW
state on every rank: ~16 bytes per parameter, 112 GB for 7B, which no single 80 GB GPU holds.
FSDP2 (``torch.distributed.fsdp.fully_shard``) keeps 1/N of each on a rank and gathers a layer's
weights only while that layer computes.

How the pieces of agentrl meet FSDP2:

* **Units.** Every decoder layer is its own FSDP unit; the rest (embedding, final norm, LM head:
  with tied embeddings one tensor) belongs to a root unit. The policy's root is a
  :class:`ShardRoot` around the Hugging Face model, because the lean forward
  (:mod:`agentrl.models.policy`) never calls the model's own ``forward``: it runs the decoder and then
  reads the head's weight itself. FSDP gathers a unit's parameters in that unit's ``forward``
  hook, so :class:`GatheredForward` runs the whole lean forward *inside* the root's forward: the
  embedding (the tied head) is whole while the head is sliced, and its gradient is
  reduce-scattered like any other. ``Policy.runners`` routes every scoring call there.
* **Same collectives on every rank.** Each forward and backward is a collective, so every pass
  runs the same number of micro-batches on every rank (:mod:`agentrl.algorithms.lockstep`).
* **Gradients are summed, not averaged.** Each rank's loss is already divided by *global*
  counts, so the global gradient is the sum over ranks; FSDP's default divides by the world size,
  and :func:`shard_module` sets the divide factor to 1. ``reduce_gradients`` skips these
  (DTensor) parameters; :func:`clip_gradients` takes the norm over the sharded gradients.
* **The reference** (KL term) is sharded the same way; **PPO's critic** too, with its own root
  (its ``forward`` is a real module forward, so no runner is needed).
* **Generation with the transformers backend** and evaluation's value traces run on gathered
  weights (:meth:`Sharding.gathered`): ranks generate different numbers of tokens, which would
  otherwise be different numbers of all-gathers. That holds a full copy per rank while it lasts;
  at 7B generate with vLLM, which receives gathered weights one tensor at a time
  (:func:`full_weights`).
* **Mixed precision** on GPUs: bf16 compute, fp32 gradient reduction (FSDP's
  ``MixedPrecisionPolicy``); none on CPU.

Checkpoints are in :mod:`agentrl.training.sharded_checkpoint`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from agentrl.errors import UserError

PARALLEL_MODES = ("none", "fsdp")

#: ids of modules whose parameters are gathered right now (:meth:`Sharding.gathered`): their
#: forwards issue no collectives, so passes need not agree on micro-batch counts.
_GATHERED: set[int] = set()


def _dtensor_type() -> type:
    from torch.distributed.tensor import DTensor

    return DTensor


def is_dtensor(tensor: Any) -> bool:
    return isinstance(tensor, _dtensor_type())


def is_sharded(module: nn.Module) -> bool:
    """True when ``module``'s forwards are collectives: FSDP-sharded (DTensor parameters) and not
    gathered for the moment. Passes over it then run equal micro-batch counts on every rank."""
    if id(module) in _GATHERED:
        return False
    first = next(module.parameters(), None)
    return first is not None and is_dtensor(first)


def clip_gradients(parameters: Iterable[torch.nn.Parameter], max_norm: float) -> float:
    """``clip_grad_norm_`` that also takes sharded (DTensor) gradients; returns the total norm of
    the global gradient as a float (a DTensor norm is a partial sum until made whole)."""
    norm = torch.nn.utils.clip_grad_norm_(list(parameters), max_norm)
    if is_dtensor(norm):
        norm = norm.full_tensor()
    return float(norm)


class ShardRoot(nn.Module):
    """The FSDP root around a model whose lean forward is not its ``forward``: calling it runs
    ``fn()`` with the root's own parameters (embedding, final norm, LM head) gathered."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, fn: Callable[[], tuple[Any, ...]]) -> tuple[Any, ...]:
        return fn()


class GatheredForward:
    """Runs a scoring call inside a :class:`ShardRoot`'s forward (``Policy.runners``).

    ``active`` is True while inside, so that :meth:`agentrl.models.policy.Policy.score_sequences`,
    called again from within, computes instead of dispatching once more. The outputs leave the
    forward as a tuple of tensors so that FSDP's pre-backward hooks see them.
    """

    def __init__(self, root: ShardRoot):
        self.root = root
        self.active = False

    def __call__(self, fn: Callable[[], Any]) -> Any:
        holder: dict[str, type] = {}

        def flat() -> tuple[Any, ...]:
            out = fn()
            holder["type"] = type(out)
            return tuple(getattr(out, f.name) for f in dataclasses.fields(out))

        self.active = True
        try:
            values = self.root(flat)
        finally:
            self.active = False
        return holder["type"](*values)


def decoder_layers(body: nn.Module) -> list[nn.Module]:
    """The decoder layers of a transformer body (``body.layers``: Llama, Qwen2, Mistral,
    SmolLM2 and the tiny test models all name them so)."""
    layers = getattr(body, "layers", None)
    if layers is None:
        raise UserError(f"train.parallel=fsdp: cannot find the decoder layers of {type(body).__name__}.")
    return list(layers)


def _mp_policy(device: torch.device):
    """bf16 compute with fp32 gradient reduction on GPUs; nothing on CPU (fp32 throughout)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if device.type == "cuda":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def shard_module(root: nn.Module, layers: list[nn.Module], device: torch.device) -> None:
    """``fully_shard`` every layer, then the root (which takes every parameter left over).

    Gradients are summed over ranks (divide factor 1: losses are already divided by global
    counts), and the root reshards after its forward like the layers, so that passes without a
    backward (old log-probs, reference) do not leave the embedding gathered.
    """
    from torch.distributed.fsdp import FSDPModule, fully_shard

    mp = _mp_policy(device)
    for layer in layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(root, mp_policy=mp)
    for module in root.modules():
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(1.0)
            # plain SUM collectives (gloo has no PREMUL_SUM; with factor 1 nothing is scaled)
            module.set_force_sum_reduction_for_comms(True)
    assert isinstance(root, FSDPModule)
    root.set_reshard_after_forward(True, recurse=False)


def _rebuild_optimizer(optimizer: torch.optim.Optimizer, module: nn.Module) -> torch.optim.Optimizer:
    """The same optimizer over ``module``'s parameters after sharding (``fully_shard`` replaces
    each parameter by a DTensor one; the old optimizer would step tensors no longer used).

    The optimizer is fresh (no state yet) and holds one group built from ``module``'s trainable
    parameters in order, which sharding keeps: the group's list is swapped in place, so every
    hyperparameter stays as the algorithm set it."""
    if optimizer.state:
        raise RuntimeError("shard the algorithm before its optimizer has stepped")
    params = [p for p in module.parameters() if p.requires_grad]
    if len(params) != sum(len(group["params"]) for group in optimizer.param_groups):
        raise RuntimeError("sharding changed the number of trainable parameters")
    # groups hold consecutive runs of the module's parameters (PPO's critic: body, then head)
    offset = 0
    for group in optimizer.param_groups:
        count = len(group["params"])
        group["params"] = params[offset:offset + count]
        offset += count
    return optimizer


@dataclass
class Sharding:
    """What :func:`shard_algorithm` wrapped: the roots (policy, reference, critic) in order."""

    roots: list[nn.Module] = field(default_factory=list)
    inner: list[nn.Module] = field(default_factory=list)  # the modules scoring passes look at

    @contextlib.contextmanager
    def gathered(self) -> Iterator[None]:
        """Every sharded module whole on every rank while the block runs: forwards issue no
        collectives, so ranks may run different numbers of them (generation, evaluation).
        Collective on entry and exit: every rank must enter."""
        from torch.distributed.fsdp import FSDPModule

        units = [m for root in self.roots for m in root.modules() if isinstance(m, FSDPModule)]
        for unit in units:
            unit.set_reshard_after_forward(False, recurse=False)
            unit.unshard()
        _GATHERED.update(id(m) for m in self.inner)
        try:
            yield
        finally:
            _GATHERED.difference_update(id(m) for m in self.inner)
            for unit in units:
                unit.reshard()
                unit.set_reshard_after_forward(True, recurse=False)


def check_parallel(parallel: str, lora_rank: int, reference_offload: bool) -> None:
    """Refuse, in one sentence, combinations ``train.parallel=fsdp`` does not support."""
    if parallel not in PARALLEL_MODES:
        raise UserError(f"Config key 'train.parallel' must be one of {', '.join(PARALLEL_MODES)}, not {parallel!r}.")
    if parallel != "fsdp":
        return
    if lora_rank > 0:
        raise UserError("train.parallel=fsdp does not support LoRA yet (model.lora_rank > 0): "
                        "LoRA's weights are small enough to train data-parallel (parallel none).")
    if reference_offload:
        raise UserError("train.parallel=fsdp shards the reference already; drop model.reference_offload.")


def shard_algorithm(algorithm: Any) -> Sharding:
    """Shard the policy, the reference and PPO's critic of a freshly built algorithm, rebuild its
    optimizers over the sharded parameters, and route the policy's scoring through the roots.

    Needs torchrun's process group (``WORLD_SIZE`` > 1)."""
    from agentrl.models.policy import decoder_of
    from agentrl.parallel.distributed import is_distributed

    if not is_distributed():
        raise UserError("train.parallel=fsdp needs several processes: start the run with "
                        "`torchrun --nproc_per_node N -m agentrl.cli run ...`.")
    if getattr(algorithm, "value_rows", None) is not None:
        raise UserError("algorithm.value_lr is not supported with train.parallel=fsdp yet (the value "
                        "rows are two rows of a sharded matrix); leave it unset there.")
    if getattr(algorithm, "value_optimizer", None) is not None:
        raise UserError("algorithm.value_epochs with algorithm.value_epoch_optimizer=own is not supported "
                        "with train.parallel=fsdp yet; set algorithm.value_epoch_optimizer=shared there.")
    policy = algorithm.policy
    device = policy.device
    sharding = Sharding()
    models = [policy.model] + ([algorithm.reference] if getattr(algorithm, "reference", None) is not None else [])
    for model in models:
        root = ShardRoot(model)
        shard_module(root, decoder_layers(decoder_of(model)), device)
        policy.runners[id(model)] = GatheredForward(root)
        sharding.roots.append(root)
        sharding.inner.append(model)
    critic = getattr(algorithm, "critic", None)
    if critic is not None:
        shard_module(critic, decoder_layers(critic.body), device)
        sharding.roots.append(critic)
        sharding.inner.append(critic)
        algorithm.critic_optimizer = _rebuild_optimizer(algorithm.critic_optimizer, critic)
    algorithm.optimizer = _rebuild_optimizer(algorithm.optimizer, policy.model)
    _lazy_init(sharding)
    return sharding


def _lazy_init(sharding: Sharding) -> None:
    """Run each root's forward once, so that FSDP marks it the root of its units. (FSDP decides
    which state is the root on the first forward it sees; a decoder layer called first, e.g. by
    generation, would claim it.)"""
    from torch.distributed.fsdp import FSDPModule

    with torch.no_grad():
        for root in sharding.roots:
            if isinstance(root, ShardRoot):
                root(lambda: ())
            else:
                from agentrl.models.policy import ScoreItem, SequenceItem

                root([SequenceItem.of(ScoreItem([0], [0]))], False)
            assert isinstance(root, FSDPModule)
            root.reshard()


def full_weights(model: nn.Module, skip: Callable[[str], bool] = lambda name: False
                 ) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` of ``model``'s weights, each gathered whole when sharded, one at a time:
    a consumer that copies each tensor away (vLLM's ``reload_weights``) never holds more than one
    gathered tensor besides its own. Collective per sharded tensor: every rank must iterate the
    same names, to the end."""
    for name, tensor in model.state_dict().items():
        if skip(name):
            continue
        if is_dtensor(tensor):
            tensor = tensor.full_tensor()
        yield name, tensor.detach()


def fsdp_rollout_config(cfg: Any, sharding: Sharding | None) -> Any:
    """The rollout settings the backend is built with. Under FSDP the transformers backend
    generates with the policy's own (gathered) weights: a separate generation copy in another
    dtype would be a deep copy of the *sharded* model, so ``generation_dtype`` becomes ``same``."""
    if sharding is None or cfg.backend == "vllm" or cfg.generation_dtype == "same":
        return cfg
    return dataclasses.replace(cfg, generation_dtype="same")


def fsdp_model_config(cfg: Any, sharding: Sharding | None) -> Any:
    """The model settings the backend is built with. Under FSDP vLLM's sync check is off: its
    probe scores the trainer's model with a plain forward, which needs whole weights (not done)."""
    if sharding is None or not cfg.vllm_sync_check:
        return cfg
    return dataclasses.replace(cfg, vllm_sync_check=False)


def effective_weights(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """What a generation engine receives: gathered tensor by tensor when ``model`` is sharded
    (:func:`full_weights`), else the effective weights with LoRA merged on the fly."""
    first = next(model.parameters(), None)
    if first is not None and is_dtensor(first):
        return full_weights(model)
    from agentrl.models.lora import merged_state_dict

    return merged_state_dict(model)
