"""Short runs of tests/distributed_job.py's coin env under ``train.parallel=fsdp``, used by
tests/test_fsdp.py: one run per algorithm of ``--algo`` (default sapo,ppo), in ``OUT/<algo>``,
one after the other in the same processes; ``--resume`` continues each from its newest checkpoint.

    torchrun --nproc_per_node 2 tests/fsdp_train_job.py OUT [--resume] [--algo=sapo,ppo] [KEY=VALUE ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    import gymnasium as gym
    from distributed_job import CoinEnv

    from agentrl.training.config import build_config
    from agentrl.training.trainer import train

    gym.register("agentrl-test/Coin-v0", entry_point=CoinEnv)
    run_dir = sys.argv[1]
    resume = "--resume" in sys.argv[2:]
    algos = next((arg.split("=", 1)[1] for arg in sys.argv[2:] if arg.startswith("--algo=")), "sapo,ppo")
    overrides = [
        "train.iterations=2", "train.save_every=1", "train.parallel=fsdp",
        "train.eval_episodes=2", "train.eval_every=1", "train.samples_per_iteration=0", "train.seed=3",
        "rollout.tasks_per_iteration=6", "rollout.action_mode=constrained", "rollout.temperature=1.0",
        "rollout.history_window=1", "rollout.max_prompt_tokens=256", "rollout.backend=hf",
        "algorithm.lr=1e-3", "algorithm.minibatch_turns=4", "algorithm.epochs=2",
        "algorithm.micro_batch_tokens=256", "algorithm.kl_coef=0.01",
    ] + [arg for arg in sys.argv[2:] if not arg.startswith("--")]
    from agentrl.parallel import distributed
    distributed.init_from_env("cpu")  # one process group for every run (the trainer then keeps it)
    for algo in algos.split(","):
        config = build_config(algo=algo, env="agentrl-test/Coin-v0", model="tiny",
                              overrides=overrides + [f"train.run_dir={run_dir}/{algo}"])
        train(config, resume=resume)
    distributed.shutdown()


if __name__ == "__main__":
    main()
