"""BM25 search over the catalog, standing in for WebShop's Lucene index (which needs Java).

Each product is indexed as WebShop indexed it: its title, description, first bullet point and
its options (``color: black, white, and size: small, large``), lowercased. Tokens are words of
two or more characters, English stop words removed, Porter-stemmed (Lucene's English analyzer
stems with Porter too). Scoring is Lucene's BM25 with k1 = 0.9, b = 0.4 (pyserini's defaults).

A query returns up to 50 products with a positive score, best first; ties keep catalog order
(a stable sort), so the same query always gives the same pages in every process.
"""

from __future__ import annotations

from collections.abc import Sequence

import bm25s
import numpy as np
import Stemmer
from bm25s.tokenization import Tokenizer

from .records import Product

SEARCH_RETURN_N = 50
K1 = 0.9
B = 0.4


def index_text(product: Product) -> str:
    """The text WebShop indexed for a product."""
    option_text = ", and ".join(f"{name}: {', '.join(values)}"
                                for name, values in product.options.items())
    first_bullet = product.bullet_points[0] if product.bullet_points else ""
    return " ".join([product.title, product.description, first_bullet, option_text]).lower()


class SearchIndex:
    """A BM25 index of ``products``; :meth:`search` returns ASINs."""

    def __init__(self, products: Sequence[Product]):
        self._asins = [p.asin for p in products]
        self._tokenizer = Tokenizer(stemmer=Stemmer.Stemmer("porter"), stopwords="english")
        corpus = self._tokenizer.tokenize(
            [index_text(p) for p in products], return_as="tuple", show_progress=False
        )
        self._bm25 = bm25s.BM25(k1=K1, b=B)
        self._bm25.index(corpus, show_progress=False)

    def __len__(self) -> int:
        return len(self._asins)

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[str]:
        """The ASINs of the top ``k`` products for ``query`` (fewer if fewer match)."""
        tokens = self._tokenizer.tokenize(
            [query.lower()], update_vocab=False, return_as="string", show_progress=False
        )[0]
        if not tokens:
            return []
        scores = self._bm25.get_scores(tokens)
        if len(scores) > k:  # keep every product scoring at least the k-th best score
            kth = np.partition(scores, len(scores) - k)[len(scores) - k]
            candidates = np.flatnonzero(scores >= max(kth, np.finfo(scores.dtype).tiny))
        else:
            candidates = np.flatnonzero(scores > 0)
        order = candidates[np.lexsort((candidates, -scores[candidates]))][:k]
        return [self._asins[i] for i in order if scores[i] > 0]
