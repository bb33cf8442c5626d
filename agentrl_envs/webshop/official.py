"""Loader for the official WebShop files, for users who have them.

WebShop ships its data as JSON files (downloaded by its ``setup.sh``):

* ``items_shuffle_1000.json`` or ``items_shuffle.json``: a list of scraped products (``asin``,
  ``name``, ``full_description``, ``small_description``, ``pricing``, ``customization_options``,
  ``product_category``, ``query``, ``category``, ...);
* ``items_ins_v2_1000.json`` or ``items_ins_v2.json``: per ASIN, the product's ``attributes`` and
  a synthetic ``instruction`` with its ``instruction_attributes``;
* ``items_human_ins.json``: per ASIN, a list of human-written instructions
  (``instruction``, ``instruction_attributes``, ``instruction_options``);
* optionally ``reviews.json``: a list of ``{asin, reviews, average_rating}``.

The conversion follows WebShop's loader: duplicate or malformed ASINs are skipped, prices are
parsed from the ``$`` pieces of the pricing string (the first two make a range; none means
$100), option values are lowercased with ``/`` written as `` | ``, a product without attributes
gets ``DUMMY_ATTR``. Goals are built as WebShop builds them (human goals: one per human
instruction with attributes; synthetic goals: one per combination of option values) and shuffled
with seed 233 into test = the first 500, eval = the next 1000, train = the rest, WebShop's split.
WebShop drew range prices and price bounds from the unseeded global random generator; here they
come from a generator seeded per product, so they are reproducible but not the original numbers.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from .goals import NO_PRICE_BOUND, options_text, price_bound, price_text
from .records import Goal, Product, Review

WEBSHOP_SPLIT_SEED = 233
WEBSHOP_TEST_SIZE = 500
WEBSHOP_EVAL_SIZE = 1000


@dataclass(frozen=True)
class OfficialFiles:
    """Where the official files are; found in a directory by :func:`find_official_files`."""

    products: Path
    attributes: Path
    human_instructions: Path | None = None
    reviews: Path | None = None


def find_official_files(data_dir: str | Path) -> OfficialFiles:
    """The official files in ``data_dir`` (the full files win over the 1000-product ones)."""
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"WebShop data directory {root} does not exist.")

    def first(*names: str) -> Path | None:
        for name in names:
            if (root / name).is_file():
                return root / name
        return None

    products = first("items_shuffle.json", "items_shuffle_1000.json")
    attributes = first("items_ins_v2.json", "items_ins_v2_1000.json")
    if products is None or attributes is None:
        raise FileNotFoundError(
            f"{root} lacks WebShop's product files: it needs items_shuffle(_1000).json and "
            "items_ins_v2(_1000).json (see WebShop's setup.sh)."
        )
    return OfficialFiles(products, attributes, first("items_human_ins.json"),
                         first("reviews.json"))


def parse_pricing(pricing: Any) -> list[float]:
    """WebShop's reading of a pricing string: the numbers after each ``$``, at most two."""
    if not pricing:
        return [100.0]
    values = []
    for piece in str(pricing).split("$")[1:]:
        digits = re.sub(r"[^\d.]", "", piece)
        if digits:
            values.append(float(Decimal(digits)))
    return values[:2] or [100.0]


def convert_product(raw: dict[str, Any], attrs: dict[str, Any], reviews: dict[str, Any],
                    seed: int) -> Product:
    """One official product record as a :class:`Product`."""
    asin = raw["asin"]
    pricing = parse_pricing(raw.get("pricing"))
    if len(pricing) == 1:
        price = pricing[0]
    else:
        price = random.Random(f"webshop-official-price:{seed}:{asin}").uniform(*pricing)
    options: dict[str, tuple[str, ...]] = {}
    for name, contents in (raw.get("customization_options") or {}).items():
        if contents is None:
            continue
        options[name.lower()] = tuple(
            c["value"].strip().replace("/", " | ").lower() for c in contents
        )
    bullets = raw.get("small_description") or []
    if not isinstance(bullets, list):
        bullets = [bullets]
    review_entry = reviews.get(asin, {})
    product_reviews = tuple(
        Review(title=str(r.get("title", "")), score=int(float(r.get("score", r.get("stars", 0)))),
               body=str(r.get("body", r.get("review", ""))))
        for r in review_entry.get("reviews", [])
    )
    return Product(
        asin=asin,
        title=raw.get("name", ""),
        category=raw.get("category", ""),
        query=str(raw.get("query", "")).lower().strip(),
        product_category=raw.get("product_category", ""),
        description=raw.get("full_description") or "",
        bullet_points=tuple(str(b) for b in bullets),
        attributes=tuple(attrs.get(asin, {}).get("attributes") or ["DUMMY_ATTR"]),
        options=options,
        pricing=tuple(pricing),
        price=price,
        rating=str(review_entry.get("average_rating", "N.A.")),
        reviews=product_reviews,
    )


def load_official_products(files: OfficialFiles, num_products: int | None = None,
                           seed: int = 0) -> list[Product]:
    """The products of the official files, WebShop's cleaning applied."""
    raw_products = json.loads(files.products.read_text())
    attrs = json.loads(files.attributes.read_text())
    reviews: dict[str, Any] = {}
    if files.reviews is not None:
        reviews = {r["asin"]: r for r in json.loads(files.reviews.read_text())}
    if num_products is not None:
        raw_products = raw_products[:num_products]
    products, seen = [], set()
    for raw in raw_products:
        asin = raw.get("asin", "nan")
        if asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        products.append(convert_product(raw, attrs, reviews, seed))
    return products


def _goal(product: Product, text: str, attributes: list[str], options: Any,
          bound: float | None) -> Goal:
    goal_options = dict(options) if isinstance(options, dict) else tuple(options or ())
    return Goal(
        asin=product.asin, instruction_text=text, attributes=tuple(attributes),
        goal_options=goal_options,
        price_upper=NO_PRICE_BOUND if bound is None else bound,
        category=product.category, query=product.query, name=product.title,
        product_category=product.product_category,
    )


def human_goals(products: list[Product], files: OfficialFiles, seed: int = 0) -> list[Goal]:
    """WebShop's human goals: one per human instruction that lists attributes."""
    if files.human_instructions is None:
        raise FileNotFoundError("items_human_ins.json is needed for human goals.")
    human = json.loads(files.human_instructions.read_text())
    goals = []
    for product in products:
        for k, entry in enumerate(human.get(product.asin, [])):
            attributes = entry.get("instruction_attributes") or []
            if not attributes:
                continue
            rng = random.Random(f"webshop-official-goal:{seed}:{product.asin}:{k}")
            bound = price_bound(product.price, rng)
            text = entry["instruction"].strip(".") + price_text(bound)
            goals.append(_goal(product, text, attributes, entry.get("instruction_options"),
                               bound))
    return goals


def synthetic_goals(products: list[Product], files: OfficialFiles, seed: int = 0) -> list[Goal]:
    """WebShop's synthetic goals: one per option combination of each instructed product."""
    attrs = json.loads(files.attributes.read_text())
    goals = []
    for product in products:
        entry = attrs.get(product.asin, {})
        instruction = entry.get("instruction")
        attributes = entry.get("instruction_attributes") or []
        if not instruction or not attributes:
            continue
        rng = random.Random(f"webshop-official-goal:{seed}:{product.asin}")
        bound = price_bound(product.price, rng)
        names = sorted(product.options)
        for combination in itertools.product(*(product.options[n] for n in names)):
            chosen = dict(zip(names, combination, strict=True))
            text = f"{instruction}{options_text(chosen)}{price_text(bound)}"
            goals.append(_goal(product, text, attributes, chosen, bound))
    return goals
