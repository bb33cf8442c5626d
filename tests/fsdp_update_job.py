"""One algorithm update on a fixed, hand-made batch, for tests/test_fsdp.py.

    python tests/fsdp_update_job.py OUT ALGOS PARALLELS [KEY=VALUE ...]
    torchrun --nproc_per_node 2 tests/fsdp_update_job.py OUT sapo,ppo,grpo fsdp

Every (parallel, algorithm) pair of the comma-separated lists runs in turn in the same processes
(torchrun's start and the imports are most of a run's time on a small CPU).

The global batch is the same whatever the number of processes: trajectory k goes to rank
``k mod world`` (whole GRPO groups: the group is ``k // 2`` and ranks take groups). One process
takes them all. Rank 0 writes ``OUT/<parallel>-<algo>.pt``: the gradients after the update (gathered whole
from FSDP's shards), the parameters after the optimizer step, the critic's too for PPO, and the
global loss sums, so the test compares one process with FSDP on the same data.

Options: ``turns=3,7`` gives rank r exactly that many one-turn trajectories (the uneven split of
the recorded hang); ``minibatch_turns``, ``micro_batch_tokens`` set the algorithm's.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch


def _trajectory(rng: random.Random, k: int, turns: int, constrained: bool, vocab: int):
    from agentrl.models.allowed import AllowedTokens
    from agentrl.rollout.trajectory import Trajectory, Turn

    traj = Trajectory(task_seed=k, group=k // 2, task=f"task {k}")
    for t in range(turns):
        prompt = [rng.randrange(3, vocab) for _ in range(rng.randrange(4, 14))]
        action = [rng.randrange(3, vocab) for _ in range(rng.randrange(1, 4))]
        allowed = None
        if constrained:
            allowed = [AllowedTokens(tuple(sorted({a, a + 1, a + 2, 5}))) for a in action]
        last = t == turns - 1
        traj.turns.append(Turn(prompt, action, [], "", "", "", "", reward=float(rng.random() * (k % 3)),
                               env_reward=0.0, terminated=last and k % 4 != 3, truncated=last and k % 4 == 3,
                               valid=True, allowed=allowed))
    if k % 4 == 3:
        traj.bootstrap_prompt_ids = [rng.randrange(3, vocab) for _ in range(6)]
    return traj


def global_batch(vocab: int) -> list:
    rng = random.Random(11)
    return [_trajectory(rng, k, 1 + k % 3, constrained=k % 2 == 1, vocab=vocab) for k in range(8)]


def main() -> None:
    from agentrl.parallel import distributed
    out, algos, parallels = Path(sys.argv[1]), sys.argv[2].split(","), sys.argv[3].split(",")
    options = dict(arg.split("=", 1) for arg in sys.argv[4:])
    distributed.init_from_env("cpu")
    for parallel in parallels:
        for algo in algos:
            run_one(out / f"{parallel}-{algo}.pt", algo, parallel, options)
    distributed.shutdown()


def run_one(path: Path, algo_name: str, parallel: str, options: dict[str, str]) -> None:
    from agentrl.algorithms import get_algorithm
    from agentrl.models.loading import build_tiny_model, load_tokenizer, resolve_model
    from agentrl.models.policy import Policy
    from agentrl.models.value_tokens import reserve_value_tokens
    from agentrl.parallel import distributed
    from agentrl.rundir.metrics import PhaseTimer

    rank, world = distributed.rank(), distributed.world_size()
    torch.manual_seed(0)
    tokenizer = load_tokenizer(resolve_model("tiny"))
    model = build_tiny_model(len(tokenizer), seed=3)
    algo_cls = get_algorithm(algo_name)
    values = reserve_value_tokens(model, tokenizer) if algo_cls.reads_values else None
    policy = Policy(model, tokenizer, values)
    settings = dict(lr=1e-3, kl_coef=0.01, entropy_coef=0.01, max_grad_norm=1e9,
                    minibatch_turns=int(options.get("minibatch_turns", 1000)),
                    micro_batch_tokens=int(options.get("micro_batch_tokens", 40)))
    if algo_name == "grpo":
        settings["group_size"] = 2
    if algo_name == "ppo":
        settings["critic_lr"] = 1e-3
    algorithm = algo_cls(algo_cls.config_class(**settings), policy, r_max=2.0, seed=5)
    if parallel == "fsdp":
        from agentrl.parallel.fsdp import shard_algorithm

        shard_algorithm(algorithm)

    if "turns" in options:
        counts = [int(c) for c in options["turns"].split(",")]
        rng = random.Random(100 + rank)
        mine = [_trajectory(rng, 2 * i + rank, 1, False, 500) for i in range(counts[rank])]
    else:
        batch = global_batch(500)
        mine = [t for t in batch if t.group % world == rank] if world > 1 else batch
    metrics = algorithm.update(mine, PhaseTimer())

    from agentrl.parallel.fsdp import full_weights, is_dtensor

    def whole(module: torch.nn.Module) -> tuple[dict, dict]:
        grads = {}
        for name, p in module.named_parameters():
            if p.grad is not None:
                g = p.grad.full_tensor() if is_dtensor(p.grad) else p.grad
                grads[name] = g.detach().clone()
        return grads, {n: t.clone() for n, t in full_weights(module)}

    grads, params = whole(policy.model)
    result = {"metrics": metrics, "grads": grads, "params": params}
    if algo_name == "ppo":
        result["critic_grads"], result["critic_params"] = whole(algorithm.critic)
    tokens = float(sum(len(t.action_ids) for traj in mine for t in traj.turns))
    turns = float(sum(len(traj.turns) for traj in mine))
    result["loss_policy_sum"], result["loss_value_sum"] = distributed.all_reduce_sum(
        [metrics.get("loss/policy", 0.0) * tokens, metrics.get("loss/value_v", 0.0) * turns])
    result["steps"] = distributed.gather_objects(metrics["optim/steps"])
    if rank == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(result, path)


if __name__ == "__main__":
    main()
