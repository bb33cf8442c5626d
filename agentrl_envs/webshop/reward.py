"""WebShop's reward for a purchase: attributes, options, price and product type.

    reward = (n_attr + n_opt + r_price) / (len(goal attributes) + len(goal options) + 1) * r_type

* ``n_attr``: goal attributes found on the product: one of the product's attributes has a fuzzy
  token-set ratio above 85 with it, or else it is a substring of the lowercased title, bullet
  points or description.
* ``n_opt``: chosen option values (colour-normalised, see :mod:`.colors`) that match a goal
  option: exactly for an option named "size", by token-set ratio above 85 otherwise, or else as a
  substring of the title, bullet points or description. Capped at the number of goal options
  (our guard: WebShop counts per chosen option and could exceed 1 when a shopper picks an option
  the goal does not mention; generated goals always name every option, so the cap never bites).
* ``r_price``: 1 if the price is at most the goal's bound.
* ``r_type``: 1, lowered to 0.5 when none of (same query, two or more shared category levels,
  title-noun overlap above 0.2) holds, to 0.1 when the overlap is below 0.1, to 0 when it is 0.
  Overlap = |nouns(bought title) ∩ nouns(goal title)| / |nouns(goal title)|, 0.2 when the goal
  title has no noun; nouns come from :mod:`.nouns` (a heuristic standing in for spaCy).

Fuzzy scores follow thefuzz (which WebShop used): both strings are reduced to lowercase ASCII
alphanumerics, scored with rapidfuzz's token-set ratio and rounded to an integer before the
comparison with 85.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from .colors import normalize_color
from .nouns import nouns
from .records import Goal, Product

FUZZY_THRESHOLD = 85
EXACT_MATCH_OPTIONS = frozenset({"size"})


@dataclass(frozen=True)
class RewardBreakdown:
    """The reward and the parts it was computed from (shown in ``info`` after a purchase)."""

    reward: float
    r_type: float
    attr_matches: int
    num_attrs: int
    option_matches: int
    num_options: int
    price_ok: bool
    query_match: bool
    category_match: bool
    title_score: float


def fuzzy_score(a: str, b: str) -> int:
    """thefuzz's ``token_set_ratio``: ASCII-only, lowercased alphanumerics, rounded to an int."""
    a = a.encode("ascii", "ignore").decode()
    b = b.encode("ascii", "ignore").decode()
    return int(round(fuzz.token_set_ratio(a, b, processor=default_process)))


def _product_text(product: Product) -> tuple[str, str, str]:
    return (product.title.lower(), " ".join(product.bullet_points).lower(),
            product.description.lower())


def _in_text(value: str, texts: tuple[str, str, str]) -> bool:
    return any(value in t for t in texts)


def title_score(product_title: str, goal_title: str) -> float:
    """Share of the goal title's nouns that the product title also has (0.2 if it has none)."""
    goal_nouns = nouns(goal_title)
    if not goal_nouns:
        return 0.2
    return len(set(nouns(product_title)) & set(goal_nouns)) / len(goal_nouns)


def type_reward(product: Product, goal: Goal) -> tuple[float, bool, bool, float]:
    """``(r_type, query_match, category_match, title_score)`` for buying ``product``."""
    query_match = product.query == goal.query
    levels_bought = {x.strip() for x in product.product_category.split("›")}
    levels_goal = {x.strip() for x in goal.product_category.split("›")}
    category_match = len(levels_bought & levels_goal) >= 2
    score = title_score(product.title, goal.name)
    r_type = 1.0
    if not (query_match or category_match or score > 0.2):
        r_type = 0.5
    if score < 0.1:
        r_type = 0.1
    if score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, score


def attribute_matches(product: Product, goal_attributes: Sequence[str]) -> int:
    """How many goal attributes the product has (fuzzy on attributes, else substring in text)."""
    texts = _product_text(product)
    count = 0
    for wanted in goal_attributes:
        if any(fuzzy_score(have, wanted) > FUZZY_THRESHOLD for have in product.attributes):
            count += 1
        elif _in_text(wanted, texts):
            count += 1
    return count


def option_matches(
    product: Product, goal_values: Sequence[str], chosen: Mapping[str, str]
) -> int:
    """How many chosen options match a goal option (see the module doc), capped."""
    wanted = [normalize_color(v) for v in goal_values]
    texts = _product_text(product)
    count = 0
    for name, value in chosen.items():
        value = normalize_color(value)
        if name.lower() in EXACT_MATCH_OPTIONS:
            matched = value in wanted
        else:
            matched = any(fuzzy_score(w, value) > FUZZY_THRESHOLD for w in wanted)
        if matched or _in_text(value, texts):
            count += 1
    return min(count, len(wanted))


def compute_reward(
    product: Product, goal: Goal, price: float, chosen: Mapping[str, str]
) -> RewardBreakdown:
    """The reward for buying ``product`` at ``price`` with options ``chosen`` for ``goal``."""
    r_type, query_match, category_match, score = type_reward(product, goal)
    goal_values = goal.option_values
    n_attr = attribute_matches(product, goal.attributes)
    n_opt = option_matches(product, goal_values, chosen)
    price_ok = price <= goal.price_upper
    denominator = len(goal.attributes) + len(goal_values) + 1
    reward = (n_attr + n_opt + int(price_ok)) / denominator * r_type
    return RewardBreakdown(
        reward=reward, r_type=r_type, attr_matches=n_attr, num_attrs=len(goal.attributes),
        option_matches=n_opt, num_options=len(goal_values), price_ok=price_ok,
        query_match=query_match, category_match=category_match, title_score=score,
    )
