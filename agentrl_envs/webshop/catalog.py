"""A generator of realistic products, deterministic per seed.

The official WebShop product files cannot be downloaded everywhere (and not on the machines this
project is tested on), so the store can run on a generated catalog instead. Product ``i`` of a
catalog depends only on ``(seed, i)``: a catalog of 500 products is the first 500 of a catalog of
5,000, which keeps small test catalogs representative of the default one.

A product gets a type from :mod:`.vocabulary` (types are used round-robin, so every type has the
same share), a brand, three to five attributes from its type's pool, a subset of its type's
option values, a price (sometimes a range, as on real listings), bullet points and a description
that mention its attributes, and a few reviews. Its title names one or two of its attributes the
way real listings cram keywords into titles.
"""

from __future__ import annotations

import random
import string

from .records import Product, Review
from .vocabulary import (
    BRAND_ENDS,
    BRAND_STARTS,
    BULLET_ENDINGS,
    DESCRIPTION_CLOSINGS,
    DESCRIPTION_OPENINGS,
    PRODUCT_TYPES,
    REVIEW_BODIES,
    REVIEW_TITLES,
    ProductType,
)

_SMALL_WORDS = frozenset({"a", "an", "and", "for", "in", "of", "on", "or", "the", "to", "with"})
_ACRONYMS = frozenset({"tv", "usb", "hdmi", "gps", "spf", "led", "gmo", "dpi", "uv", "gan"})
_ASIN_CHARS = string.digits + string.ascii_uppercase


def title_case(phrase: str) -> str:
    """Title Case as listings write it: small words stay lowercase, tokens like 5.3 or 4k stay."""
    words = []
    for i, word in enumerate(phrase.split()):
        if word in _ACRONYMS:
            words.append(word.upper())
        elif i > 0 and word in _SMALL_WORDS:
            words.append(word)
        elif word[:1].isalpha():
            words.append(word[:1].upper() + word[1:])
        else:
            words.append(word.upper() if word.isalnum() and not word.isdigit() else word)
    return " ".join(words)


def _asin(rng: random.Random) -> str:
    return "B0" + "".join(rng.choice(_ASIN_CHARS) for _ in range(8))


def _price(rng: random.Random, low: float, high: float) -> tuple[tuple[float, ...], float]:
    """A listing price (``.99`` endings) or, one time in ten, a price range and a price in it."""
    base = int(rng.uniform(low, high)) + 0.99
    if rng.random() < 0.1:
        top = int(base * rng.uniform(1.15, 1.5)) + 0.99
        return (base, top), round(rng.uniform(base, top), 2)
    return (base,), base


def _reviews(rng: random.Random, attributes: tuple[str, ...]) -> tuple[Review, ...]:
    out = []
    for _ in range(rng.choice((0, 1, 2, 2, 3))):
        score = rng.choice((2, 3, 4, 4, 5, 5, 5))
        body = rng.choice(REVIEW_BODIES).format(attr=rng.choice(attributes))
        out.append(Review(title=rng.choice(REVIEW_TITLES), score=score, body=body))
    return tuple(out)


def make_product(seed: int, index: int, ptype: ProductType | None = None) -> Product:
    """Product ``index`` of the catalog drawn with ``seed`` (a pure function of both)."""
    ptype = ptype or PRODUCT_TYPES[index % len(PRODUCT_TYPES)]
    rng = random.Random(f"webshop-product:{seed}:{index}")
    brand = rng.choice(BRAND_STARTS) + rng.choice(BRAND_ENDS)
    head = rng.choice(ptype.heads)
    style = rng.choice(ptype.styles)
    audience = rng.choice(ptype.audiences)
    attributes = tuple(rng.sample(ptype.attributes, rng.randint(3, min(5, len(ptype.attributes)))))

    in_title = attributes[: rng.choice((1, 2))]
    title_parts = [brand, style, head]
    if audience:
        title_parts.append(audience)
    title = " ".join(title_parts) + ", " + " ".join(title_case(a) for a in in_title)

    options: dict[str, tuple[str, ...]] = {}
    for name, values in ptype.options.items():
        k = rng.randint(min(2, len(values)), min(5, len(values)))
        chosen = set(rng.sample(values, k))
        options[name] = tuple(v for v in values if v in chosen)  # keep the type's natural order

    bullets = tuple(
        f"{attr.upper()} - {rng.choice(BULLET_ENDINGS)}" for attr in attributes
    ) + (f"WHAT YOU GET - one {brand} {head.lower()} and our friendly support.",)
    rest = [a for a in attributes if a not in in_title] or list(attributes)
    description = " ".join([
        rng.choice(DESCRIPTION_OPENINGS).format(brand=brand, head=head.lower()),
        f"Customers choose it because it is {', '.join(rest[:-1]) + ' and ' if len(rest) > 1 else ''}"
        f"{rest[-1]}.",
        rng.choice(DESCRIPTION_CLOSINGS).format(brand=brand),
    ])

    pricing, price = _price(rng, *ptype.price)
    reviews = _reviews(rng, attributes)
    rating = f"{sum(r.score for r in reviews) / len(reviews):.1f}" if reviews else "N.A."
    return Product(
        asin=_asin(rng),
        title=title,
        category=ptype.category,
        query=ptype.query,
        product_category=" › ".join(ptype.path),
        description=description,
        bullet_points=bullets,
        attributes=attributes,
        options=options,
        pricing=pricing,
        price=price,
        rating=rating,
        reviews=reviews,
    )


def generate_products(num_products: int, seed: int = 0) -> list[Product]:
    """The first ``num_products`` products of catalog ``seed``, with unique ASINs."""
    if num_products < 1:
        raise ValueError("num_products must be at least 1")
    products: list[Product] = []
    seen: set[str] = set()
    for i in range(num_products):
        product = make_product(seed, i)
        if product.asin in seen:  # 36**8 codes: rare, but a duplicate would merge two products
            rng = random.Random(f"webshop-asin:{seed}:{i}")
            asin = _asin(rng)
            while asin in seen:
                asin = _asin(rng)
            product = Product(**{**product.__dict__, "asin": asin})
        seen.add(product.asin)
        products.append(product)
    return products
