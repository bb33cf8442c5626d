"""A scripted shopper that knows the goal: the env's ``expert_action`` and a sanity baseline.

It acts from the current page alone (plus the searches made so far), so it recovers from any
detour a learner or a random agent took:

* search page: search the instruction (without its price clause); if that was already tried,
  search the target's title;
* results page: open the target if it is listed, else any listed product that would earn reward
  1 with the right options; else the next page (results go five pages deep); else back to search;
* item page of a product worth buying: choose each wanted option that is not chosen yet, then
  buy; item page of another product: back to the results;
* Description / Features / Reviews: back to the item page.

"Worth buying" is decided with the reward itself (:func:`.reward.compute_reward`), so for the
generated catalog the oracle only buys what earns 1. With official human goals some targets
cannot earn 1 (the instruction asks for something the listing lacks); the target is then bought
anyway.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .colors import normalize_color
from .page_text import PageView
from .records import Goal, Product
from .reward import FUZZY_THRESHOLD, compute_reward, fuzzy_score
from .shop import Shop

PRICE_CLAUSE = ", and price lower than"
MAX_RESULT_PAGES = 5


def instruction_query(goal: Goal) -> str:
    """The instruction as a search query: lowercased, without the price clause."""
    return goal.instruction_text.split(PRICE_CLAUSE)[0].strip().lower()


def title_query(goal: Goal) -> str:
    return " ".join(goal.name.lower().split())


def best_options(product: Product, goal: Goal) -> dict[str, str]:
    """For each of the product's options, the value the goal asks for (when one fits)."""
    wanted = goal.option_values
    named = goal.goal_options if isinstance(goal.goal_options, dict) else {}
    chosen: dict[str, str] = {}
    for name, values in product.options.items():
        if named.get(name) in values:
            chosen[name] = named[name]
            continue
        best, best_score = None, FUZZY_THRESHOLD
        for value in values:
            norm = normalize_color(value)
            for w in wanted:
                score = 101 if norm == normalize_color(w) else fuzzy_score(w, norm)
                if score > best_score:
                    best, best_score = value, score
        if best is not None:
            chosen[name] = best
    return chosen


def worth_buying(product: Product, goal: Goal) -> bool:
    """The target itself, or a product that earns reward 1 with the best options."""
    if product.asin == goal.asin:
        return True
    return compute_reward(product, goal, product.price, best_options(product, goal)).reward == 1.0


def next_action(page: PageView, goal: Goal, shop: Shop, searches: Sequence[str]) -> str:
    """The oracle's action for ``page`` (see the module doc); "" once the episode is over."""
    names = page.click_names()
    kind = page.kind
    if page.has_search_bar:
        first = instruction_query(goal)
        return f"search[{first if first not in searches else title_query(goal)}]"
    if kind == "results":
        listed = [c.name for c in page.clickables if c.kind == "link"]
        target = goal.asin.lower()
        if target in listed:
            return f"click[{target}]"
        for asin in listed:
            product = shop.by_asin.get(asin.upper())
            if product is not None and worth_buying(product, goal):
                return f"click[{asin}]"
        if "next >" in names and int(page.meta.get("page-num", "1")) < MAX_RESULT_PAGES:
            return "click[next >]"
        return "click[back to search]"
    if kind == "item":
        product = shop.by_asin.get(page.meta.get("asin", ""))
        if product is None or not worth_buying(product, goal):
            return "click[< prev]"
        current = json.loads(page.meta.get("options", "{}"))
        for name, value in best_options(product, goal).items():
            if current.get(name) != value:
                return f"click[{value}]"
        return "click[buy now]"
    if kind in ("description", "features", "reviews"):
        return "click[< prev]"
    if kind == "done":
        return ""
    return "click[back to search]" if "back to search" in names else ""
