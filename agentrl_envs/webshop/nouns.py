"""A rule-based stand-in for spaCy's noun tagging in WebShop's type reward.

WebShop compares the nouns of the bought product's title with those of the target's title, using
spaCy's ``en_core_web_sm`` tagger (tokens tagged NOUN or PROPN). That model is not installable on
the machines this project targets, so this module decides noun-hood from the word alone:

* a token is a run of letters, lowercased; tokens of one letter are dropped (spaCy splits
  "Men's" into "Men" + "'s" and "T-Shirt" into "T", "-", "Shirt": the same words survive);
* it is *not* a noun if it is a function word, a number, or in the lexicon of adjectives, verbs
  and adverbs below (colours, sizes and the usual listing adjectives), or if it has an adjective
  or participle ending (-able, -ible, -ful, -less, -ous, -ive, -ish, -proof, -ed, -ing) and is not
  a known noun with that ending ("clothing", "bed");
* everything else counts as a noun; brand names therefore count, as spaCy tags them PROPN.

Where it differs from spaCy: spaCy tags by context, so the same word may be a noun in one title
and a modifier in another ("running" in "running shoes", "gold" in "gold earrings"), and it
sometimes tags an unknown capitalised adjective as PROPN. The heuristic is context-free. On the
generated catalog every title word is covered by the lexicon or follows the rules, so the type
reward behaves as intended; on the official files scores may differ slightly from the original.
"""

from __future__ import annotations

import re

from .colors import COLOR_WORDS

_TOKEN = re.compile(r"[a-z]+")

_FUNCTION_WORDS = frozenset("""
a an the and or nor but of in on at by for with without to from into onto over under up down out
off as per via vs x is are be been was were it its this that these those my your our their his
her he she we they you i me us them all any each every both no not only so than too very can
will just also more most less few many much some such own same other another s t
""".split())

_ADJECTIVES = frozenset("""
new old big small large little long short tall wide narrow thin thick slim light heavy soft hard
hot cold warm cool dry wet fresh raw clean clear dark bright deep high low full empty open closed
round square flat straight curly wavy silky creamy smooth rough rich lightweight premium
professional classic modern vintage retro basic simple complete compact mini portable foldable
adjustable durable natural organic original pure real genuine universal extra super ultra
best better good great fine nice pretty cute beautiful elegant luxury luxurious fancy casual
formal daily everyday quick fast slow instant strong gentle sensitive mild spicy sweet sour
salty fiery smoky crunchy chewy crispy nutty sturdy rustic boho sheer matte satin velvet glossy
bold neon pastel metallic ergonomic vertical horizontal outdoor indoor digital electric
electronic wireless cordless smart rugged thermal quilted insulated seamless flare capri strappy
swing ancient whole single double triple dual multi japanese chinese italian greek spanish
french colombian californian louisiana moroccan geometric abstract solid minimalist industrial
farmhouse executive gaming true free proof friendly resistant safe eco non anti broad
multicolor silver golden gold black white gray grey red blue green yellow pink purple orange
brown beige navy tan ivory cream khaki olive teal maroon burgundy coral nude clear transparent
mid mens womens unisex kids adult adults men's women's kid's everyday deluxe bulk craft estate
ceremonial homestyle cozy comfy trendy stylish lovely easy athletic acidic hypoallergenic
whitening volumizing cleansing
""".split()) | frozenset(COLOR_WORDS) - {"light", "stone", "sand", "rose", "wine", "steel",
                                         "coffee", "chocolate", "christmas", "skull", "tiger"}

_VERBS = frozenset("""
looking make makes made use used using fit fits fitting keep keeps wash washable go get gets buy
see need want feel feels look looks come comes work works clip-in lift lifting lace fold add
love ship ships shipping designed built
""".split())

_ADVERBS = frozenset("""
lightly highly easily quickly daily only really well extra fully perfectly
""".split())

_NOUN_EXCEPTIONS = frozenset("""
clothing bedding lighting packaging seasoning flooring ring rings string strings spring springs
king wing wings thing things ceiling pudding stocking stockings earring earrings charging
bed beds shed seed seeds speed feed reed need
bowl bottle table cable needle candle handle
""".split())

_ADJECTIVE_ENDINGS = ("able", "ible", "ful", "less", "ous", "ive", "ish", "proof")


def is_noun(word: str) -> bool:
    """Whether the lowercased alphabetic token ``word`` counts as a noun (see module doc)."""
    if len(word) < 2 or word in _NOUN_EXCEPTIONS:
        return word in _NOUN_EXCEPTIONS
    if word in _FUNCTION_WORDS or word in _ADJECTIVES or word in _VERBS or word in _ADVERBS:
        return False
    if len(word) >= 5 and word.endswith(_ADJECTIVE_ENDINGS):
        return False
    if len(word) >= 5 and word.endswith("ed"):
        return False
    if len(word) >= 6 and word.endswith("ing"):
        return False
    return True


def nouns(text: str) -> list[str]:
    """The noun tokens of ``text``, lowercased, in order (duplicates kept, as spaCy's list)."""
    return [w for w in _TOKEN.findall(text.lower()) if is_noun(w)]
