"""The store's HTML pages: WebShop's page flow and wording, self-contained.

Every page is plain HTML with a small inline style sheet and no external asset of any kind: a
browser with no network must load it instantly (a single CDN link stalls a page load for
seconds). Clickable things follow three shapes the page reader (:mod:`.page_text`) and the
browser transport both rely on: ``<button class="btn">`` inside a form (its text is the action
name), ``<a class="product-link">`` (the ASIN), and ``<input type="radio">`` (an option value;
its inline ``onclick`` loads the URL in ``data-url``, as WebShop's page did with jQuery).

The ``<head>`` carries ``ws-*`` meta tags (page kind, product, query, chosen options, score) so the
env can follow the state without parsing prose, and ``<body data-render>`` changes on every
render so the browser transport can tell that a click has loaded a new page.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from jinja2 import DictLoader, Environment, select_autoescape

from .records import Product
from .reward import RewardBreakdown

PRODUCTS_PER_PAGE = 10

_STYLE = """
body{font-family:sans-serif;margin:24px;color:#222}
.btn{margin:2px 6px 2px 0;padding:4px 10px;border:1px solid #888;border-radius:4px;
background:#f4f4f4;cursor:pointer}
form{display:inline}
.item{border-bottom:1px solid #ddd;padding:6px 0}
.opt label{margin-right:10px}
#instruction-text{background:#fff8dc;padding:4px 10px;margin-bottom:12px}
"""

_TEMPLATES = {
    "layout.html": """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>WebShop</title><link rel="icon" href="data:,">
<meta name="ws-page" content="{{ page }}">
{% for key, value in meta.items() %}<meta name="ws-{{ key }}" content="{{ value }}">
{% endfor %}<style>{{ style }}</style></head>
<body data-render="{{ render_id }}">
{% if instruction %}<div id="instruction-text"><h4>Instruction:</h4><p>{{ instruction }}</p></div>
{% endif %}{% block content %}{% endblock %}
</body></html>""",
    "search.html": """{% extends "layout.html" %}{% block content %}
<div id="logo"><h2>WebShop</h2></div>
<form id="search-form" method="post" action="{{ urls.home }}">
<input id="search_input" type="text" name="search_query" placeholder="Search..." required>
<button type="submit" class="btn">Search</button>
</form>{% endblock %}""",
    "results.html": """{% extends "layout.html" %}{% block content %}
<div class="nav"><form method="post" action="{{ urls.home }}"><button type="submit" class="btn">Back to Search</button></form></div>
<p>Page {{ page_num }} (Total results: {{ total }})</p>
<div class="nav">{% if urls.prev %}<form method="post" action="{{ urls.prev }}"><button type="submit" class="btn">&lt; Prev</button></form>{% endif %}
{% if urls.next %}<form method="post" action="{{ urls.next }}"><button type="submit" class="btn">Next &gt;</button></form>{% endif %}</div>
{% for item in items %}<div class="item">
<a class="product-link" href="{{ item.url }}">{{ item.asin }}</a>
<h4>{{ item.title }}</h4>
<h5>{{ item.price }}</h5>
</div>
{% endfor %}{% endblock %}""",
    "item.html": """{% extends "layout.html" %}{% block content %}
<div class="nav"><form method="post" action="{{ urls.home }}"><button type="submit" class="btn">Back to Search</button></form>
<form method="post" action="{{ urls.back }}"><button type="submit" class="btn">&lt; Prev</button></form></div>
{% for option in options %}<div class="opt"><h4>{{ option.name }}</h4>
{% for choice in option.choices %}<input type="radio" id="opt-{{ option.index }}-{{ loop.index0 }}" name="{{ option.name }}" value="{{ choice.value }}" data-url="{{ choice.url }}" onclick="window.location.href=this.dataset.url"{% if choice.checked %} checked{% endif %}>
<label for="opt-{{ option.index }}-{{ loop.index0 }}">{{ choice.value }}</label>
{% endfor %}</div>
{% endfor %}<div class="product"><h2>{{ product.title }}</h2>
<h4>Price: {{ product.price_tag }}</h4>
<h4>Rating: {{ product.rating }}</h4>
<div class="tabs">{% for tab, url in urls.tabs %}<form method="post" action="{{ url }}"><button type="submit" class="btn">{{ tab }}</button></form>
{% endfor %}</div>
<form method="post" action="{{ urls.buy }}"><button type="submit" class="btn">Buy Now</button></form></div>
{% endblock %}""",
    "tab.html": """{% extends "layout.html" %}{% block content %}
<div class="nav"><form method="post" action="{{ urls.home }}"><button type="submit" class="btn">Back to Search</button></form>
<form method="post" action="{{ urls.back }}"><button type="submit" class="btn">&lt; Prev</button></form></div>
<div class="tab-body">{% if tab == "Description" %}<p>{{ product.description or "No description" }}</p>
{% elif tab == "Features" %}{% if product.bullet_points %}<ul>{% for bullet in product.bullet_points %}<li>{{ bullet }}</li>
{% endfor %}</ul>{% else %}<p>No features</p>{% endif %}
{% else %}{% for review in product.reviews %}<div class="review"><h4>"{{ review.title }}"</h4>
<p>{{ review.score }}</p>
<p>{{ review.body }}</p></div>
{% else %}<h4>No reviews found</h4>{% endfor %}{% endif %}</div>
{% endblock %}""",
    "done.html": """{% extends "layout.html" %}{% block content %}
<div id="thankyou"><h1>Thank you for shopping with us!</h1></div>
<div id="stats"><h3>Your score (min 0.0, max 1.0)</h3>
<p id="reward">{{ score_text }}</p></div>
{% endblock %}""",
    "message.html": """{% extends "layout.html" %}{% block content %}
<h2>{{ message }}</h2>{% endblock %}""",
}

_env = Environment(loader=DictLoader(_TEMPLATES), autoescape=select_autoescape(default=True),
                   trim_blocks=False)

TABS = ("Description", "Features", "Reviews")


@dataclass(frozen=True)
class PageUrls:
    """Builds the store's URLs for one session (all relative to the store's origin)."""

    session_id: str

    @property
    def home(self) -> str:
        return f"/s/{self.session_id}"

    def results(self, query: str, page: int) -> str:
        return f"/s/{self.session_id}/results?" + urlencode({"q": query, "p": page})

    def item(self, asin: str, query: str, page: int, options: Mapping[str, str],
             tab: str | None = None) -> str:
        path = f"/s/{self.session_id}/item/{quote(asin)}" + (f"/{tab.lower()}" if tab else "")
        return path + "?" + urlencode({"q": query, "p": page, "o": encode_options(options)})

    def buy(self, asin: str, options: Mapping[str, str]) -> str:
        return f"/s/{self.session_id}/buy/{quote(asin)}?" + urlencode({"o": encode_options(options)})


def encode_options(options: Mapping[str, str]) -> str:
    """Chosen options as they travel in URLs and meta tags (compact JSON, order kept)."""
    return json.dumps(dict(options), separators=(",", ":"), ensure_ascii=False)


def _render(name: str, page: str, render_id: int, instruction: str, meta: Mapping[str, str],
            **context: object) -> str:
    return _env.get_template(name).render(
        page=page, render_id=render_id, instruction=instruction, meta=meta, style=_STYLE,
        **context,
    )


def search_page(urls: PageUrls, render_id: int, instruction: str) -> str:
    return _render("search.html", "search", render_id, instruction, {}, urls=urls)


def results_page(urls: PageUrls, render_id: int, instruction: str, query: str, page_num: int,
                 products: list[Product], total: int) -> str:
    items = [{"asin": p.asin, "title": p.title, "price": p.price_tag,
              "url": urls.item(p.asin, query, page_num, {})} for p in products]
    nav = {
        "home": urls.home,
        "prev": urls.results(query, page_num - 1) if page_num > 1 else None,
        "next": urls.results(query, page_num + 1) if page_num * PRODUCTS_PER_PAGE < total else None,
    }
    meta = {"query": query, "page-num": str(page_num)}
    return _render("results.html", "results", render_id, instruction, meta, urls=nav,
                   page_num=page_num, total=total, items=items)


def item_page(urls: PageUrls, render_id: int, instruction: str, product: Product, query: str,
              page_num: int, options: Mapping[str, str]) -> str:
    option_rows = []
    for index, (name, values) in enumerate(product.options.items()):
        choices = [{"value": v, "checked": options.get(name) == v,
                    "url": urls.item(product.asin, query, page_num, {**options, name: v})}
                   for v in values]
        option_rows.append({"name": name, "index": index, "choices": choices})
    nav = {
        "home": urls.home,
        "back": urls.results(query, page_num),
        "tabs": [(tab, urls.item(product.asin, query, page_num, options, tab)) for tab in TABS],
        "buy": urls.buy(product.asin, options),
    }
    meta = {"asin": product.asin, "query": query, "page-num": str(page_num),
            "options": encode_options(options)}
    return _render("item.html", "item", render_id, instruction, meta, urls=nav,
                   product=product, options=option_rows)


def tab_page(urls: PageUrls, render_id: int, instruction: str, product: Product, tab: str,
             query: str, page_num: int, options: Mapping[str, str]) -> str:
    nav = {"home": urls.home, "back": urls.item(product.asin, query, page_num, options)}
    meta = {"asin": product.asin, "query": query, "page-num": str(page_num),
            "options": encode_options(options)}
    return _render("tab.html", tab.lower(), render_id, instruction, meta, urls=nav,
                   product=product, tab=tab)


def done_page(render_id: int, asin: str, options: Mapping[str, str],
              breakdown: RewardBreakdown) -> str:
    meta = {"asin": asin, "options": encode_options(options), "score": repr(breakdown.reward),
            "reward-info": json.dumps(breakdown.__dict__)}
    return _render("done.html", "done", render_id, "", meta,
                   score_text=str(round(breakdown.reward, 4)))


def message_page(render_id: int, message: str) -> str:
    return _render("message.html", "message", render_id, "", {}, message=message)
