"""The training loop: rollout -> algorithm update -> metrics, with checkpoints and resume.

One iteration draws ``rollout.tasks_per_iteration`` task seeds (deterministic in the run seed
and the iteration number), plays each ``algorithm.rollouts_per_task()`` times, hands the
trajectories to the algorithm, pushes the new weights to the generation backend and writes one
JSON line of metrics. Everything a run produces goes to its run directory::

    config.yaml          the resolved configuration
    metrics.jsonl        one record per iteration (and eval records)
    samples/             a few trajectories per iteration, as text, with V/Q/advantages
    eval/                evaluation trajectories (value traces for reports)
    checkpoints/iter_N/  save_pretrained model + tokenizer + value-token ids + trainer state
    summary.json         the final numbers

Resume is exact: every random stream an iteration draws from (torch, python and numpy RNGs, the
algorithm's minibatch shuffles, the backend's sampler, evaluation's sampler) is reseeded at the
start of the iteration from ``(train.seed, iteration)`` (:func:`stream_seed`), task seeds come
from the same pair, and the checkpoint holds weights and optimizer state. So iteration k draws
the same numbers whether or not the process restarted before it. The run directory is written
so that a kill at any moment leaves a resumable run (:mod:`agentrl.rundir.checkpoints`).
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from agentrl.algorithms import Algorithm, get_algorithm
from agentrl.algorithms.base import NonFiniteUpdate
from agentrl.envs.contract import r_max as env_r_max
from agentrl.envs.failures import EnvStopped
from agentrl.errors import UserError
from agentrl.models.lora import (
    is_adapter_checkpoint,
    is_peft_model,
    load_adapter_weights,
    save_adapter_checkpoint,
)
from agentrl.models.policy import Policy
from agentrl.models.value_tokens import ValueTokens
from agentrl.parallel.distributed import (
    all_reduce_max,
    global_record,
    init_from_env,
    is_main,
    rank,
    shutdown,
    split_groups,
    world_size,
)
from agentrl.parallel.fsdp import Sharding, fsdp_model_config, fsdp_rollout_config, shard_algorithm
from agentrl.parallel.offload import autocast, offload_reference
from agentrl.rollout.engine import RolloutEngine, Task
from agentrl.rollout.evaluation import episode_metrics, evaluate
from agentrl.rollout.trajectory import Trajectory
from agentrl.rundir import fingerprint as data_fingerprint
from agentrl.rundir.checkpoints import (
    STATE_FILE,
    ResumeFallbackWarning,
    check_run_dir,
    latest_checkpoint,
    read_saved_config,
    remove_stale_temp_files,
    resume_checkpoint,
    save_config,
    write_checkpoint,
)
from agentrl.rundir.durable import atomic_write_text, crash_point
from agentrl.rundir.layout import CONFIG_FILE, EVAL_DIR, METRICS_FILE, SAMPLES_DIR, SUMMARY_FILE
from agentrl.rundir.metrics import (
    MetricsLog,
    PhaseTimer,
    count_parameters,
    peak_memory,
    reset_peak_memory,
)
from agentrl.training.compose import env_factory, load_for_training, make_backend, make_engine
from agentrl.training.config import RunConfig
from agentrl.training.fingerprints import for_run
from agentrl.training.loggers import MetricSink, open_sinks
from agentrl.training.producer import fresh_episodes, start_producer
from agentrl.training.resume import (
    check_resume_config,
    nonfinite_message,
    readout_difference,
    warn_on_readout_change,
)
from agentrl.training.seeds import _python_rng_state, seed_everything, stream_seed, task_seeds
from agentrl.training.sharded_checkpoint import (
    load_sharded,
    without_optimizers,
    write_sharded_checkpoint,
)


def default_run_dir(config: RunConfig) -> Path:
    # "agentrl/KeyDoor-v0" -> keydoor-v0; "mymod:MyEnv-v0" -> myenv-v0 (no ':' in folder names)
    env = re.split(r"[/:]", config.env.id)[-1].lower()
    return Path("runs") / f"{config.algo}-{env}-{time.strftime('%Y%m%d-%H%M%S')}"


@dataclass
class RunResult:
    run_dir: Path
    history: list[dict[str, Any]] = field(default_factory=list)
    final_eval: dict[str, float] | None = None
    #: ``should_stop`` ended it early: checkpointed, no summary.json, resumable where it stopped
    stopped: bool = False


class Trainer:
    def __init__(self, config: RunConfig, resume: bool = False, rollout_lag: int | None = None):
        """``rollout_lag``: play this many iterations ahead through the producer (agentrl.training.producer);
        None: ``rollout.max_staleness`` (0: the synchronous loop); 0: the producer on the synchronous
        schedule (tests check it against the loop key by key)."""
        lag = config.rollout.max_staleness if rollout_lag is None else rollout_lag
        asynchronous = lag > 0 or rollout_lag is not None
        self.config = config
        algo_cls: type[Algorithm] = get_algorithm(config.algo)
        check_run_dir(config.train.run_dir)  # a new or empty folder, or a run: nothing else is written into
        self.run_dir = Path(config.train.run_dir) if config.train.run_dir is not None else default_run_dir(config)
        self.metrics_log = MetricsLog(self.run_dir / METRICS_FILE)
        #: one line each for what resume had to work around (a newer checkpoint it could not read)
        self.resume_warnings: list[str] = []
        found = self._resume_point() if resume else None
        checkpoint = found[0] if found is not None else None
        # --resume of a run killed before its first checkpoint starts it over (same numbers)
        self.restarted = resume and checkpoint is None
        if not resume:
            self._check_fresh()
        # under torchrun (WORLD_SIZE > 1): join the process group before anything else
        self.owns_process_group = init_from_env(config.model.device)
        seed_everything(config.train.seed + rank())

        factory = env_factory(config.env, "train")
        probe = factory()
        self.r_max = env_r_max(probe)
        # which tasks train and eval play (fingerprint.json, summary.json); a data mistake in
        # either split surfaces here, before any model loads
        self.fingerprints = for_run(config, probe, factory,
                                                     self.run_dir if resume else None)
        probe.close()

        loaded = load_for_training(config.model, algo_cls.reads_values, seed=config.train.seed)
        self.tokenizer = loaded.tokenizer
        self.value_tokens: ValueTokens | None = loaded.value_tokens
        self.policy = Policy(loaded.model, loaded.tokenizer, loaded.value_tokens, config.rollout.temperature)
        self.algorithm = algo_cls(config.algorithm, self.policy, self.r_max, seed=config.train.seed)
        warn_on_readout_change(config.model.name, checkpoint, self.algorithm)
        if config.model.reference_offload:
            offload_reference(self.algorithm, self.policy.device)
        # train.parallel=fsdp: policy, reference and critic sharded over the ranks (agentrl/parallel/fsdp.py)
        self.sharding: Sharding | None = None
        if config.train.parallel == "fsdp":
            self.sharding = shard_algorithm(self.algorithm)
        self.start_iteration = 0
        self.env_steps = 0
        self.trajectories_seen = 0
        self.wall_time = 0.0
        if found is not None:
            self._restore(*found)
        # the sampler is reseeded at the start of every iteration (_seed_iteration); asynchronous
        # rollouts: a worker with a weight copy of its own plays ahead, and evaluates between
        self.producer = start_producer(self.policy, config, factory, self._tasks, lag) if asynchronous else None
        self.algorithm.asynchronous = lag > 0
        self.backend = self.producer.backend if self.producer is not None else make_backend(
            self.policy, fsdp_rollout_config(config.rollout, self.sharding), seed=config.train.seed + rank(),
            model_cfg=fsdp_model_config(config.model, self.sharding))
        self.engine: RolloutEngine = (self.producer.engine if self.producer is not None
                                      else make_engine(self.policy, self.backend, config.rollout, factory))
        self._eval_engine: RolloutEngine | None = None
        if is_main():
            self.run_dir.mkdir(parents=True, exist_ok=True)
            remove_stale_temp_files(self.run_dir)
            save_config(config, self.run_dir)
            data_fingerprint.write(self.run_dir, self.fingerprints)
            # records past the checkpoint are redone; a cut-off last line goes too
            self.metrics_log.truncate_after(self.start_iteration)
        self.sinks: list[MetricSink] = []
        if is_main() and config.train.loggers:
            self.sinks = open_sinks(config.train.loggers, self.run_dir, asdict(config),
                                    (self.run_dir / CONFIG_FILE).read_text())

    def _resume_point(self) -> tuple[Path, dict[str, Any]] | None:
        """The checkpoint to resume from and its trainer state, after checking the config
        against the run's own: the newest whose state can be read (each newer one skipped is
        a line in :attr:`resume_warnings`).

        None for a run killed before its first checkpoint: it starts over from iteration 0,
        which reproduces the same numbers (every stream is derived from seed and iteration).
        """
        saved = read_saved_config(self.run_dir)
        if saved is not None:
            check_resume_config(self.run_dir, saved, self.config)
        found = resume_checkpoint(self.run_dir)
        if found is None and saved is None:
            raise UserError(f"Cannot resume: '{self.run_dir}' holds no run (no checkpoint and no config.yaml).")
        if found is None:
            return None
        folder, state, skipped = found
        self.resume_warnings.extend(skipped)
        for line in skipped:
            warnings.warn(line, ResumeFallbackWarning, stacklevel=2)
        return folder, state

    def _check_fresh(self) -> None:
        if self.metrics_log.read():
            raise UserError(f"Run directory '{self.run_dir}' already holds a run; pass --resume to continue it or choose another run_dir.")

    # --- the loop ----------------------------------------------------------------------------------
    def train(self, on_iteration: Callable[[dict[str, Any]], None] | None = None,
              should_stop: Callable[[], bool] | None = None) -> RunResult:
        """Train to ``train.iterations``. ``should_stop`` is asked after each iteration (any rank
        saying yes stops all): a yes before the last iteration writes a checkpoint there and
        returns with ``stopped`` set, so a run cut into pieces (a time limit) loses nothing and
        resumes at the next iteration; the evaluation and summary of the end are left to it."""
        result = RunResult(self.run_dir)
        cfg = self.config.train
        if cfg.eval_at_start and cfg.eval_episodes and self.start_iteration == 0:
            self._eval_start(result)
        for iteration in range(self.start_iteration + 1, cfg.iterations + 1):
            try:
                record = self.iteration(iteration)
            except EnvStopped as exc:  # rollout.env_errors=stop: one sentence, the run resumable
                raise EnvStopped(f"{exc}; the run stopped in iteration {iteration}, and --resume continues it "
                                 f"from its last checkpoint once the env is fixed (rollout.env_errors=truncate "
                                 f"ends only such episodes instead).") from exc.__cause__
            evaluating = bool(cfg.eval_episodes) and (iteration == cfg.iterations or bool(
                cfg.eval_every and iteration % cfg.eval_every == 0))
            saved = (cfg.save_every > 0 and iteration % cfg.save_every == 0) or iteration == cfg.iterations
            if self.producer is not None and (evaluating or saved):
                self.producer.wait()  # evaluation and checkpoints run with the worker idle,
                if evaluating:  # evaluation with this iteration's weights (published early)
                    self.producer.publish(iteration)
            with self.whole_weights(evaluating):  # fsdp: every rank gathers, rank 0 evaluates
                if cfg.eval_episodes and cfg.eval_every and iteration % cfg.eval_every == 0 and iteration != cfg.iterations and is_main():
                    record.update(self.run_eval(iteration))
                if iteration == cfg.iterations and cfg.eval_episodes and is_main():
                    result.final_eval = self.run_eval(iteration)
                    record.update(result.final_eval)
            self._log(record, iteration)
            result.history.append(record)
            if on_iteration is not None:
                on_iteration(record)
            # save_every 0: only at the end
            if saved:
                self.save_checkpoint(iteration)
            if iteration < cfg.iterations and should_stop is not None and all_reduce_max([int(should_stop())])[0]:
                if not saved:
                    self.save_checkpoint(iteration)
                result.stopped = True
                return result
        if is_main():
            # resuming a run that had already finished trains nothing: its numbers are in the log
            last = result.history[-1] if result.history else (self.metrics_log.read() or [None])[-1]
            final_eval = result.final_eval
            if final_eval is None and last is not None and last.get("iteration") == cfg.iterations:
                final_eval = {k: v for k, v in last.items() if k.startswith("eval/")} or None
            summary = {"iterations": cfg.iterations, "run_dir": str(self.run_dir),
                       "final_eval": final_eval, "last": last, "fingerprint": self.fingerprints}
            atomic_write_text(self.run_dir / SUMMARY_FILE, json.dumps(summary, indent=2, default=str) + "\n")
        return result

    def _log(self, record: dict[str, Any], iteration: int) -> None:
        """One iteration's record to metrics.jsonl and every logger (rank 0 only)."""
        if is_main():
            self.metrics_log.write(record)
            crash_point("metrics", iteration)
            for sink in self.sinks:
                sink.log(record, iteration)

    def _eval_start(self, result: RunResult) -> None:
        """``train.eval_at_start``: the starting model's held-out numbers as iteration 0 (once: a
        run restarted before its first checkpoint keeps the record it has). Rank 0 reads the log
        and every rank follows its answer, so all of them enter the gathered block or none."""
        recorded = is_main() and any(r.get("iteration") == 0 for r in self.metrics_log.read())
        if all_reduce_max([int(recorded)])[0]:
            return
        with self.whole_weights(True):
            metrics = self.run_eval(0) if is_main() else {}
        record: dict[str, Any] = {"iteration": 0, "env_steps": 0, "trajectories": 0, "wall_time": 0.0, **metrics}
        self._log(record, 0)
        if is_main():
            result.history.append(record)

    def iteration(self, iteration: int) -> dict[str, Any]:
        cfg = self.config
        timer = PhaseTimer()
        reset_peak_memory()
        start = time.perf_counter()
        self._seed_iteration(iteration)
        async_metrics: dict[str, float] = {}  # async/*: staleness, drops, restarts
        if self.producer is None:
            with timer.phase("rollout"), self.whole_weights(self.backend.name == "hf"):
                rollout = self.engine.run(self._tasks(iteration))
            trajectories = rollout.trajectories
            for traj in trajectories:
                traj.policy_version = iteration - 1
            played_seconds = timer.seconds["rollout"]
        else:
            with timer.phase("rollout"):  # only the wait, once rollouts run ahead
                played = self.producer.next_batch(iteration)
            rollout, played_seconds = played.rollout, played.seconds
            trajectories, async_metrics = fresh_episodes(rollout.trajectories, iteration - 1, self.producer.lag)
            async_metrics.update({"async/restarted": float(played.restarted), "time/rollout_played": played.seconds})
        crash_point("update", iteration)
        sleeper = self.backend if getattr(self.backend, "sleeps", False) else None
        if sleeper is not None:  # vLLM on a GPU gives its memory to the update (model.vllm_sleep)
            with timer.phase("vllm_sleep"):
                sleeper.sleep()
        with autocast(cfg.model.autocast, self.policy.device):
            try:
                algo_metrics = self.algorithm.update(trajectories, timer)
            except NonFiniteUpdate as exc:
                raise UserError(nonfinite_message(latest_checkpoint(self.run_dir) if is_main() else None, iteration, exc)) from exc
        if sleeper is not None:
            with timer.phase("vllm_wake"):
                sleeper.wake_up()
        if self.producer is None:  # else the worker gets them when it is idle (producer.publish)
            with timer.phase("weight_sync"):
                self.backend.sync_weights()
        elapsed = time.perf_counter() - start
        self.env_steps += rollout.env_steps
        self.trajectories_seen += len(trajectories)
        self.wall_time += elapsed
        record: dict[str, Any] = {
            "iteration": iteration,
            "env_steps": self.env_steps,
            "trajectories": self.trajectories_seen,
            "wall_time": self.wall_time,
        }
        record.update(episode_metrics(trajectories, "rollout"))
        if cfg.rollout.env_errors == "truncate":  # episodes an env exception ended (agentrl.envs.failures)
            record["rollout/env_errors"] = float(rollout.extra.get("env_errors", 0))
        record.update(algo_metrics)
        record.update(timer.metrics())
        record["time/iteration"] = elapsed
        record["time/env"] = rollout.env_seconds
        record["time/generate"] = rollout.generate_seconds
        record["perf/generated_tokens"] = float(rollout.generated_tokens)
        record["tokens/prompt"] = float(rollout.prompt_tokens)
        record["tokens/prefix_reusable"] = float(rollout.reusable_prompt_tokens)
        # the hf backend prefills every prompt token; with vLLM's prefix cache the reusable ones
        # are (up to block granularity, and barring evictions) skipped: an estimate there
        cached = getattr(self.backend, "caches_prefixes", False)
        prefilled = rollout.prefilled_tokens  # counted by the hf backend
        if prefilled is None:
            prefilled = rollout.prompt_tokens - (rollout.reusable_prompt_tokens if cached else 0)
        record["tokens/prefilled"] = float(prefilled)
        record["perf/tokens_per_s"] = rollout.generated_tokens / max(rollout.generate_seconds, 1e-9)
        record["perf/env_steps_per_s"] = rollout.env_steps / max(played_seconds, 1e-9)
        record.update(async_metrics)
        last_sync = getattr(self.backend, "last_sync", None)  # the vLLM engine's probe check
        if last_sync is not None:
            record["sync/relative_gap"] = last_sync.relative_gap
        record.update(peak_memory())
        record.update(timer.peaks)
        record.update(count_parameters(*self.algorithm.modules()))
        record = global_record(record, len(trajectories), rollout.turns)  # the global batch
        if is_main():
            self._write_samples(iteration, trajectories)
        return record

    def _tasks(self, iteration: int) -> list[Task]:
        """Iteration ``iteration``'s tasks on this rank (whole groups per rank: GRPO)."""
        k = self.algorithm.rollouts_per_task()
        seeds = task_seeds(self.config.train.seed, iteration, self.config.rollout.tasks_per_iteration)
        tasks = [Task(seed=s, group=g) for g, s in enumerate(seeds) for _ in range(k)]
        return split_groups(tasks, rank(), world_size())

    def _seed_iteration(self, iteration: int) -> None:
        """Reseed every random stream iteration ``iteration`` draws from, from (seed, iteration).
        The minibatch shuffles use no rank (every rank shuffles alike, as before); the sampler
        and the global RNGs (dropout, anything else) get one stream per rank."""
        seed = self.config.train.seed
        if self.producer is None or not self.producer.owns_global_rng:  # else the worker's sampler
            seed_everything(stream_seed(seed, iteration, "global", rank()))
        self.algorithm.generator.manual_seed(stream_seed(seed, iteration, "minibatches"))
        if self.producer is None:  # the worker reseeds each batch it plays
            self.backend.reseed(stream_seed(seed, iteration, "sampling", rank()))

    # --- evaluation ---------------------------------------------------------------------------------
    @property
    def eval_engine(self) -> RolloutEngine:
        if self._eval_engine is None:
            self._eval_engine = make_engine(self.policy, self.backend, self.config.rollout,
                                            env_factory(self.config.env, "eval"))
        return self._eval_engine

    def run_eval(self, iteration: int) -> dict[str, float]:
        cfg = self.config.train
        start = time.perf_counter()
        # evaluation draws from a stream of its own: the same episodes at iteration k whether or
        # not the run was resumed, and training's streams are reseeded before the next iteration
        self.backend.reseed(stream_seed(self.config.train.seed, iteration, "eval", rank()))
        trajectories = evaluate(self.eval_engine, cfg.eval_episodes, cfg.eval_greedy, version=iteration)
        self.algorithm.value_trace(trajectories)
        metrics = episode_metrics(trajectories, "eval")
        metrics["time/eval"] = time.perf_counter() - start
        if is_main():
            folder = self.run_dir / EVAL_DIR
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write_text(folder / f"iter_{iteration:05d}.jsonl", _jsonl(trajectories))
        return metrics

    # --- checkpoints --------------------------------------------------------------------------------
    def whole_weights(self, active: bool = True) -> contextlib.AbstractContextManager:
        """Under FSDP, every sharded module gathered while the block runs (when ``active``), so
        that ranks may run different numbers of forwards (generation, evaluation); a no-op
        otherwise. Every rank must enter it."""
        if self.sharding is None or not active:
            return contextlib.nullcontext()
        return self.sharding.gathered()

    def save_checkpoint(self, iteration: int) -> Path | None:
        """Write checkpoint ``iteration`` crash-safely (:func:`agentrl.rundir.checkpoints.write_checkpoint`);
        under FSDP every rank writes its shards (:mod:`agentrl.training.sharded_checkpoint`)."""
        if self.sharding is not None:
            return write_sharded_checkpoint(self.run_dir, iteration, self.algorithm,
                                            lambda folder: self._fill_checkpoint(folder, iteration))
        if not is_main():
            return None
        return write_checkpoint(self.run_dir, iteration, lambda folder: self._fill_checkpoint(folder, iteration))

    def _fill_checkpoint(self, folder: Path, iteration: int) -> None:
        """Everything a resume needs, ``trainer_state.pt`` last (its presence marks the
        checkpoint complete)."""
        if self.sharding is not None:
            pass  # the full model and the shards are written already (agentrl.training.sharded_checkpoint)
        elif is_peft_model(self.policy.model):  # adapters only; agentrl.models.lora.merge makes a full model
            save_adapter_checkpoint(self.policy.model, folder, self.config.model.name, self.config.train.seed)
        else:
            self.policy.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        if self.value_tokens is not None:
            self.value_tokens.save(folder, readout=self.algorithm.readout_settings())
        if self.sharding is None:  # under FSDP the critic is in the shards
            self.algorithm.save_extra(folder)
        crash_point("checkpoint", iteration)
        algorithm_state = self.algorithm.state_dict()
        if self.sharding is not None:
            algorithm_state = without_optimizers(algorithm_state)
        torch.save({
            "iteration": iteration,
            "env_steps": self.env_steps,
            "trajectories": self.trajectories_seen,
            "wall_time": self.wall_time,
            "algorithm": algorithm_state,
            # tensors and plain numbers only: resume loads this file with weights_only=True
            "torch_rng": torch.get_rng_state(),
            "python_rng": list(random.getstate()),
        }, folder / STATE_FILE)

    def _restore(self, folder: Path, state: dict[str, Any]) -> None:
        """Weights, optimizer state, RNGs and counters of checkpoint ``folder`` (``state``: its
        trainer state, already read safely by :func:`agentrl.rundir.checkpoints.read_state`)."""
        from transformers import AutoModelForCausalLM

        saved = ValueTokens.load(folder)
        if saved != self.value_tokens:
            raise UserError(f"Checkpoint '{folder}' reserved value tokens {saved} but the model now has {self.value_tokens}; resume with the same model.")
        differs = readout_difference(folder, self.algorithm)
        if differs is not None:
            raise UserError(f"Checkpoint '{folder}' was trained reading values with {differs[0]} but this run "
                            f"asks for {differs[1]}; resume with the same algorithm settings.")
        if self.sharding is not None:
            load_sharded(folder, self.algorithm)  # weights and optimizer states, every rank
        elif is_adapter_checkpoint(folder):
            load_adapter_weights(self.policy.model, folder)
        else:
            weights = AutoModelForCausalLM.from_pretrained(folder, dtype=next(self.policy.model.parameters()).dtype)
            self.policy.model.load_state_dict(weights.state_dict())
            del weights
        self.algorithm.load_state_dict(state["algorithm"])
        if self.sharding is None:
            self.algorithm.load_extra(folder)
        torch.set_rng_state(state["torch_rng"])
        random.setstate(_python_rng_state(state["python_rng"]))
        self.start_iteration = int(state["iteration"])
        self.env_steps = int(state["env_steps"])
        self.trajectories_seen = int(state["trajectories"])
        self.wall_time = float(state["wall_time"])

    def _write_samples(self, iteration: int, trajectories: list[Trajectory]) -> None:
        count = self.config.train.samples_per_iteration
        if count <= 0:
            return
        folder = self.run_dir / SAMPLES_DIR
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / f"iter_{iteration:05d}.jsonl", _jsonl(trajectories[:count]))

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()
        self.sinks = []
        if self.producer is not None:
            self.producer.close()  # before the env pool it plays in
        self.engine.pool.close()
        if self._eval_engine is not None:
            self._eval_engine.pool.close()
        self.backend.close()  # before the group goes: a vLLM engine under torchrun uses it
        if self.owns_process_group:
            shutdown()


def _jsonl(trajectories: list[Trajectory]) -> str:
    return "".join(json.dumps(traj.to_json()) + "\n" for traj in trajectories)


def train(config: RunConfig, resume: bool = False,
          on_iteration: Callable[[dict[str, Any]], None] | None = None) -> RunResult:
    """Public entry point: train with ``config`` and return the run's metrics."""
    trainer = Trainer(config, resume=resume)
    try:
        return trainer.train(on_iteration)
    finally:
        trainer.close()
