"""The two records every part of the store shares: a product and a shopping goal.

Both the catalog generator and the loader of the official WebShop files produce these, so the
store, the search index, the reward and the oracle never care where the data came from. Field
names follow WebShop's meaning (title, bullet points, attributes, options, query, category path)
so that a reader who knows the original recognises them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Review:
    """One customer review shown on a product's Reviews page."""

    title: str
    score: int
    body: str


@dataclass(frozen=True)
class Product:
    """A product of the catalog, as the store shows it and the reward reads it.

    ``pricing`` holds one price or a ``(low, high)`` range as displayed; ``price`` is the single
    number the reward compares with the goal's bound (for a range WebShop draws it once inside
    the range, and so do we, deterministically).
    """

    asin: str
    title: str
    category: str  # the top category (beauty, electronics, ...): the env's task_type
    query: str  # the search query the product was collected under (type reward)
    product_category: str  # "Level 1 › Level 2 › ..." (type reward: shared levels)
    description: str
    bullet_points: tuple[str, ...]
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]] = field(hash=False)
    pricing: tuple[float, ...]
    price: float
    rating: str = "N.A."
    reviews: tuple[Review, ...] = ()

    @property
    def price_tag(self) -> str:
        """The price as the item page prints it: ``$12.99`` or ``$10.99 to $20.99``."""
        if len(self.pricing) >= 2:
            return f"${self.pricing[0]:.2f} to ${self.pricing[1]:.2f}"
        return f"${self.pricing[0]:.2f}"


@dataclass(frozen=True)
class Goal:
    """A shopping task: what to buy, described by an instruction and judged by the reward.

    ``name`` is the target product's title (WebShop compares title nouns for the type reward);
    ``goal_options`` maps an option name to the wanted value, or is a plain list of values (the
    official human goals give options without names).
    """

    asin: str
    instruction_text: str
    attributes: tuple[str, ...]
    goal_options: dict[str, str] | tuple[str, ...] = field(hash=False)
    price_upper: float
    category: str
    query: str
    name: str
    product_category: str

    @property
    def option_values(self) -> list[str]:
        """The wanted option values, whatever form ``goal_options`` has."""
        if isinstance(self.goal_options, dict):
            return list(self.goal_options.values())
        return list(self.goal_options)
