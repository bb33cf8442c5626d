"""Which WebShop goals an env plays, for :mod:`agentrl.rundir.fingerprint`.

The goals of a split are decided by the catalog (generated from a seed and a size, or WebShop's
official files) and the goal source; the digest covers the ordered goal list itself (target
product and instruction of each goal), so two stores that would give seed ``s`` a different
goal never share a digest.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from typing import TYPE_CHECKING, Any

from .shop import load_shop

if TYPE_CHECKING:
    from .env import WebShopConfig


def goals_digest(goals: list[Any]) -> str:
    """SHA-256 over the ordered (asin, instruction) pairs of a split's goals."""
    digest = hashlib.sha256()
    for goal in goals:
        digest.update(f"{goal.asin}\t{goal.instruction_text}\n".encode())
    return digest.hexdigest()


def shop_fingerprint(config: WebShopConfig) -> dict[str, Any]:
    """Source, split, sizes and goal digest of ``config``'s store (loads the catalog, which is
    built once per process and shared with the env's own store)."""
    rules = config.rules
    shop = load_shop(config.source)
    goals = shop.splits[config.split]
    official = config.data_dir is not None
    try:
        selenium = importlib.metadata.version("selenium")
    except importlib.metadata.PackageNotFoundError:
        selenium = None
    out: dict[str, Any] = {
        "source": "official" if official else "generated",
        "split": config.split,
        "split_size": len(goals),
        "products": len(shop.products),
        "goal_source": config.goal_source if official else "generated",
        "games_sha256": goals_digest(goals),
        "protocol": config.protocol,
        "reward": (f"{config.reward_scale:g} for a perfect purchase, else 0"
                   if rules.pay_only_wins else f"WebShop score x {config.reward_scale:g}")
                  + f" ({rules.reward} reward rule)",
        "options": {"max_steps": config.max_steps, "reward_scale": config.reward_scale,
                    "protocol": config.protocol, "reward": rules.reward,
                    "split_rule": rules.split_rule,
                    "num_products": config.num_products, "catalog_seed": config.catalog_seed,
                    "goals_per_product": config.goals_per_product,
                    "goal_source": config.goal_source, "transport": config.transport,
                    "show_instruction": config.show_instruction},
        "versions": {"selenium": selenium},
    }
    if official:
        out["local"] = {"data_dir": config.data_dir}
    else:
        out["comparability"] = "generated catalog and goals: not comparable to published WebShop numbers"
    return out
