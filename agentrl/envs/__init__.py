"""The envs room: the text-env contract, env lookup and users' env modules, the contract checker,
env workers, env failures and step timeouts. The only part of agentrl that ``agentrl_envs`` imports;
it imports nothing of agentrl but :mod:`agentrl.errors`.

The contract's names are re-exported here, so ``from agentrl.envs import text_space`` works."""

from agentrl.envs.contract import (
    ENV_ALIASES,
    PLACEHOLDER,
    REQUIRED_INFO_KEYS,
    TEXT_CHARSET,
    EnvContractError,
    check_info,
    check_text_env,
    expert_action,
    is_admissible,
    make_env,
    r_max,
    resolve_env_id,
    text_space,
)

__all__ = ["ENV_ALIASES", "PLACEHOLDER", "REQUIRED_INFO_KEYS", "TEXT_CHARSET", "EnvContractError",
           "check_info", "check_text_env", "expert_action", "is_admissible", "make_env", "r_max",
           "resolve_env_id", "text_space"]
