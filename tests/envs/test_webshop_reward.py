"""WebShop's reward, on hand-made products and goals whose fractions are worked out here."""

from __future__ import annotations

import pytest

pytest.importorskip("rapidfuzz")

from agentrl_envs.webshop.colors import normalize_color  # noqa: E402
from agentrl_envs.webshop.nouns import nouns  # noqa: E402
from agentrl_envs.webshop.records import Goal, Product  # noqa: E402
from agentrl_envs.webshop.reward import (  # noqa: E402
    compute_reward,
    fuzzy_score,
    title_score,
    type_reward,
)

pytestmark = pytest.mark.webshop

TITLE = "Acme Clip in Hair Extensions for Women, Heat Resistant"


def product(**changes) -> Product:
    fields = dict(
        asin="B000000001",
        title=TITLE,
        category="beauty",
        query="hair extensions",
        product_category="Beauty & Personal Care › Hair Care › Hair Extensions",
        description="Soft synthetic hair that blends in.",
        bullet_points=("HEAT RESISTANT - style it with hot tools", "TANGLE FREE - stays smooth"),
        attributes=("heat resistant", "natural looking", "long lasting"),
        options={"color": ("natural black", "dark brown", "light brown", "ash blonde"),
                 "size": ("14 inch", "18 inch")},
        pricing=(25.0,),
        price=25.0,
    )
    fields.update(changes)
    return Product(**fields)


def goal(**changes) -> Goal:
    fields = dict(
        asin="B000000001",
        instruction_text="i need natural looking heat resistant hair extensions",
        attributes=("natural looking", "heat resistant"),
        goal_options={"color": "dark brown", "size": "18 inch"},
        price_upper=30.0,
        category="beauty",
        query="hair extensions",
        name=TITLE,
        product_category="Beauty & Personal Care › Hair Care › Hair Extensions",
    )
    fields.update(changes)
    return Goal(**fields)


RIGHT = {"color": "dark brown", "size": "18 inch"}


def test_all_correct_is_one():
    # (2 attributes + 2 options + price) / (2 + 2 + 1) * r_type 1
    result = compute_reward(product(), goal(), 25.0, RIGHT)
    assert result.reward == 1.0
    assert (result.attr_matches, result.option_matches, result.price_ok) == (2, 2, True)


def test_wrong_size_is_exact_matched():
    # size is compared exactly: "14 inch" != "18 inch" and not in the text -> 1 of 2 options
    result = compute_reward(product(), goal(), 25.0, {"color": "dark brown", "size": "14 inch"})
    assert result.reward == pytest.approx((2 + 1 + 1) / 5)  # 0.8


def test_wrong_color():
    # "ash blonde" normalises to "ash", the goal's "dark brown" to "brown": no match
    result = compute_reward(product(), goal(), 25.0, {"color": "ash blonde", "size": "18 inch"})
    assert result.reward == pytest.approx((2 + 1 + 1) / 5)


def test_colour_normalisation_quirk_is_kept():
    # "light brown" and "dark brown" both normalise to "brown", so WebShop counts it as right
    result = compute_reward(product(), goal(), 25.0, {"color": "light brown", "size": "18 inch"})
    assert result.reward == 1.0


def test_no_options_chosen():
    result = compute_reward(product(), goal(), 25.0, {})
    assert result.reward == pytest.approx((2 + 0 + 1) / 5)  # 0.6


def test_price_too_high():
    result = compute_reward(product(), goal(), 35.0, RIGHT)
    assert result.reward == pytest.approx((2 + 2 + 0) / 5)  # 0.8
    assert not result.price_ok


def test_price_equal_to_bound_is_fine():
    assert compute_reward(product(), goal(), 30.0, RIGHT).price_ok


def test_partial_attributes():
    # "machine wash" is neither close to an attribute nor in the title, bullets or description
    g = goal(attributes=("natural looking", "heat resistant", "machine wash"))
    result = compute_reward(product(), g, 25.0, RIGHT)
    assert result.reward == pytest.approx((2 + 2 + 1) / 6)
    assert result.attr_matches == 2


def test_attribute_found_in_bullet_points():
    # "tangle free" is not an attribute, but the features text has it
    g = goal(attributes=("tangle free",))
    assert compute_reward(product(), g, 25.0, RIGHT).reward == 1.0


def test_attribute_fuzzy_match():
    # token-set ratio ignores order and punctuation: "looking natural" matches "natural looking"
    g = goal(attributes=("looking natural",))
    assert compute_reward(product(), g, 25.0, RIGHT).attr_matches == 1


def test_wrong_type_scores_zero():
    # Different query, no shared category level, no shared title noun -> r_type 0
    earbuds = product(title="Bolt Wireless Earbuds, Noise Cancelling", query="wireless earbuds",
                      product_category="Electronics › Headphones › Earbud Headphones")
    result = compute_reward(earbuds, goal(), 25.0, {})
    assert result.r_type == 0.0 and result.reward == 0.0


def test_half_type_reward():
    # Goal title nouns: acme, clip, hair, extensions, women, heat (6). A hair dryer shares
    # "hair" only: 1/6 = 0.167, not above 0.2 and not below 0.1; no query or category match
    # -> r_type 0.5. It has "heat resistant" (1 of 2 attributes), no options, a good price.
    dryer = product(title="Zed Hair Dryer", query="hair dryer",
                    product_category="Appliances › Hair Dryers", attributes=("heat resistant",),
                    bullet_points=(), description="", options={})
    result = compute_reward(dryer, goal(), 25.0, {})
    assert result.title_score == pytest.approx(1 / 6)
    assert result.r_type == 0.5
    assert result.reward == pytest.approx((1 + 0 + 1) / 5 * 0.5)  # 0.2


def test_tenth_type_reward():
    # 12 goal-title nouns, one shared ("comb"): 1/12 < 0.1 -> r_type 0.1, even though the
    # category matches (the low-overlap rules come after the match rule)
    long_name = "Acme Clip Hair Extensions Women Heat Wig Ponytail Bangs Clips Comb Brush"
    comb = product(title="Zed Comb Set", attributes=("natural looking", "heat resistant"))
    g = goal(name=long_name)
    assert len(nouns(long_name)) == 12
    result = compute_reward(comb, g, 25.0, RIGHT)
    assert result.r_type == pytest.approx(0.1)
    assert result.reward == pytest.approx((2 + 2 + 1) / 5 * 0.1)


def test_query_match_cannot_save_a_title_without_shared_nouns():
    # Same query, but "extension" is not "extensions": no shared noun -> the 0 rule wins
    other = product(title="Zed Ponytail Extension, Long Lasting")
    r_type, query_match, _, score = type_reward(other, goal())
    assert query_match and score == 0.0 and r_type == 0.0


def test_query_match_with_low_overlap_keeps_full_type_reward():
    # shares "hair" and "extensions": 2/6 = 0.33 > 0.2 and the query matches -> 1.0
    other = product(title="Zed Ponytail Hair Extensions")
    r_type, query_match, _, score = type_reward(other, goal())
    assert query_match and score == pytest.approx(2 / 6) and r_type == 1.0


def test_goal_title_without_nouns_scores_point_two():
    assert title_score("Anything", "Soft and Lightweight") == 0.2


def test_normalize_color():
    assert normalize_color("dark brown") == "brown"  # "brown" sorts before "dark"
    assert normalize_color("dark gray") == "dark"  # ... and "dark" before "gray"
    assert normalize_color("navy blue") == "blue"
    assert normalize_color("18 inch") == "18 inch"


def test_fuzzy_score_is_thefuzz_like():
    assert fuzzy_score("Natural-Looking", "natural looking") == 100
    assert fuzzy_score("long lasting", "lasting long") == 100
    assert fuzzy_score("20w", "30w") < 85


def test_noun_heuristic():
    assert nouns("Men's Running Shoes, Lightweight Breathable") == ["men", "shoes"]
    assert nouns("Velly Bed Sheet Set, Deep Pocket") == ["velly", "bed", "sheet", "set", "pocket"]
