"""The web store's pages and flow, the page reader, the server's lifecycle and the URL guard."""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest

pytest.importorskip("Stemmer")
pytest.importorskip("flask")
pytest.importorskip("bm25s")

from agentrl_envs.webshop.http_transport import HttpTransport  # noqa: E402
from agentrl_envs.webshop.page_text import read_page  # noqa: E402
from agentrl_envs.webshop.reward import compute_reward  # noqa: E402
from agentrl_envs.webshop.server import acquire_server, release_server  # noqa: E402
from agentrl_envs.webshop.shop import ShopSource, load_shop  # noqa: E402
from agentrl_envs.webshop.store import Store  # noqa: E402
from agentrl_envs.webshop.transport import ForeignUrlError, StoreGuard  # noqa: E402

pytestmark = pytest.mark.webshop


@pytest.fixture(scope="module")
def shop():
    return load_shop(ShopSource(num_products=200, seed=0))


@pytest.fixture()
def client_and_goal(shop):
    store = Store(shop)
    goal = shop.goal("test", 0)
    sid = store.open_session(goal)
    return store, store.app.test_client(), sid, goal


def search(client, sid, query):
    response = client.post(f"/s/{sid}", data={"search_query": query})
    assert response.status_code == 303
    return read_page(client.get(response.headers["Location"]).text)


def test_search_page(client_and_goal):
    store, client, sid, goal = client_and_goal
    page = read_page(client.get(f"/s/{sid}").text)
    assert page.kind == "search" and page.text == "WebShop [SEP] Search"
    assert page.has_search_bar and page.click_names() == []  # search with search[...]
    shown = read_page(client.get(f"/s/{sid}").text, show_instruction=True)
    assert shown.text == f"Instruction: [SEP] {goal.instruction_text} [SEP] WebShop [SEP] Search"


def test_results_pages(client_and_goal, shop):
    _, client, sid, _ = client_and_goal
    page = search(client, sid, "Color  Wireless")  # every product with a colour matches
    expected = shop.index.search("color wireless")
    assert len(expected) == 50
    assert page.kind == "results" and page.meta["query"] == "color wireless"
    assert page.text.startswith(f"Back to Search [SEP] Page 1 (Total results: {len(expected)})")
    links = [c.name for c in page.clickables if c.kind == "link"]
    assert links == [a.lower() for a in expected[:10]]
    first = shop.by_asin[expected[0]]
    assert f"{expected[0]} [SEP] {first.title} [SEP] {first.price_tag}" in page.text
    assert page.click_names()[:2] == ["back to search", "next >"] and "< prev" not in page.text
    second = read_page(client.post(page.find("next >").target).text)
    assert second.meta["page-num"] == "2" and second.click_names()[:3] == [
        "back to search", "< prev", "next >"]
    assert [c.name for c in second.clickables if c.kind == "link"] == [
        a.lower() for a in expected[10:20]]
    last = read_page(client.get(f"/s/{sid}/results?q=color+wireless&p=5").text)
    assert "next >" not in last.click_names()  # 50 results, 10 a page


def test_item_flow_and_purchase(client_and_goal, shop):
    store, client, sid, goal = client_and_goal
    page = search(client, sid, goal.name)
    item = read_page(client.get(page.find(goal.asin.lower()).target).text)
    product = shop.by_asin[goal.asin]
    assert item.kind == "item" and item.meta["asin"] == goal.asin
    names = item.click_names()
    assert names[:2] == ["back to search", "< prev"]
    assert names[-4:] == ["description", "features", "reviews", "buy now"]
    assert f"Price: {product.price_tag} [SEP] Rating: {product.rating}" in item.text
    for option_name, values in product.options.items():
        assert " [SEP] ".join([option_name, *values]) in item.text
    # choose every goal option, one click each; the chosen radio is checked
    for name, value in goal.goal_options.items():
        html = client.get(item.find(value).target).text
        item = read_page(html)
        assert json.loads(item.meta["options"])[name] == value
        assert f'value="{value}"' in html and "checked" in html
    features = read_page(client.post(item.find("features").target).text)
    assert features.kind == "features" and features.click_names() == ["back to search", "< prev"]
    assert all(b in features.text for b in product.bullet_points)
    back = read_page(client.post(features.find("< prev").target).text)
    assert back.meta["options"] == item.meta["options"]  # options survive the detour
    done = read_page(client.post(back.find("buy now").target).text)
    expected = compute_reward(product, goal, product.price, dict(goal.goal_options)).reward
    assert done.kind == "done" and float(done.meta["score"]) == expected == 1.0
    assert done.text == ("Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) "
                         "[SEP] 1.0")
    assert store.session(sid).purchase[0] == goal.asin


def test_partial_purchase_score(client_and_goal, shop):
    _, client, sid, goal = client_and_goal
    # buy the target without choosing options: (attributes + 0 + price) / (... + 1)
    done = read_page(client.post(f"/s/{sid}/buy/{goal.asin}?o=%7B%7D").text)
    n_attrs, n_opts = len(goal.attributes), len(goal.goal_options)
    assert float(done.meta["score"]) == pytest.approx((n_attrs + 1) / (n_attrs + n_opts + 1))


def test_unknown_session_and_product(client_and_goal):
    _, client, sid, _ = client_and_goal
    assert client.get("/s/nope").status_code == 404
    assert client.get(f"/s/{sid}/item/B0NOTHERE0").status_code == 404
    assert client.get("/admin").status_code == 404
    assert client.get(f"/s/{sid}/buy/B0NOTHERE0").status_code == 405  # buying needs POST


def test_server_binds_loopback_and_is_shared(shop):
    first = acquire_server(shop)
    second = acquire_server(shop)
    assert first is second and first.url.startswith("http://127.0.0.1:")
    assert first._server.socket.getsockname()[0] == "127.0.0.1"
    sid = first.store.open_session(shop.goal("train", 0))
    with urllib.request.urlopen(f"{first.url}/s/{sid}") as response:
        assert read_page(response.read().decode()).kind == "search"
    port = first.port
    release_server(second)
    assert first.running  # one user left
    release_server(first)
    assert not first.running
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_guard_refuses_foreign_urls():
    guard = StoreGuard("http://127.0.0.1:5000")
    assert guard.resolve("/s/abc") == "http://127.0.0.1:5000/s/abc"
    assert guard.resolve("item/B0X?q=1", "http://127.0.0.1:5000/s/abc/") == (
        "http://127.0.0.1:5000/s/abc/item/B0X?q=1")
    for url in ("http://example.com/s/abc", "http://127.0.0.1:5001/s/abc", "/admin",
                "https://127.0.0.1:5000/s/abc", "//evil.test/s/x", "file:///etc/passwd"):
        with pytest.raises(ForeignUrlError):
            guard.resolve(url)


def test_http_transport_refuses_and_follows(shop):
    server = acquire_server(shop)
    try:
        transport = HttpTransport(server.url)
        with pytest.raises(ForeignUrlError):
            transport.open("http://example.com/")
        sid = server.store.open_session(shop.goal("train", 1))
        page = read_page(transport.open(f"{server.url}/s/{sid}"))
        results = read_page(transport.search(page.search_action, "green tea"))
        assert results.kind == "results" and results.meta["query"] == "green tea"
        transport.close()
    finally:
        release_server(server)
