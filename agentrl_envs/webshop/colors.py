"""Colour normalisation of option values, as WebShop's reward applies it.

WebShop reduces an option value to the first colour word it contains, scanning an alphabetical
list of about a hundred colour words (so "dark brown" and "light brown" both become "brown", and
"navy blue" becomes "blue"); a value without a colour word is left as it is. The reward then
compares the normalised values. The quirks are kept on purpose: they are part of the benchmark's
scoring.
"""

from __future__ import annotations

#: The colour words, alphabetical: the scan order decides which word wins.
COLOR_WORDS: tuple[str, ...] = tuple(sorted("""
alabaster apricot aqua ash asphalt azure banana beige black blue blush bordeaux bronze brown
burgundy camel camo caramel champagne charcoal cheetah chestnut chocolate christmas coffee cognac
copper coral cranberry cream crystal dark denim eggplant elephant espresso fuchsia gold granite
grape graphite grass gray green grey heather indigo ivory ivy khaki lavender lemon leopard light
lilac lime magenta maroon mauve merlot midnight mint mocha multicolor mushroom mustard natural
navy nude olive orange peach pewter pink plum purple rainbow red rose royal rust sand sapphire
seashell silver skull slate steel stone stonewash sunflower tan taupe teal tiger turquoise violet
walnut wheat white wine yellow
""".split()))


def normalize_color(value: str) -> str:
    """The alphabetically first colour word that occurs in ``value`` (as a substring), else it."""
    for color in COLOR_WORDS:
        if color in value:
            return color
    return value
