"""``agentrl/WebShop-v0``: WebShop as a Gymnasium text env on a real local web store.

An episode is one shopping goal. ``reset(seed=s)`` opens goal ``s`` (modulo the split's size) of
the chosen split in a new store session and shows its search page; ``step(action)`` carries the
action to the store through the transport and shows the page it leads to. Actions follow
WebShop: ``search[query]`` on a page with a search bar, ``click[name]`` for a clickable name of
the current page (button text, product ASIN or option value, lowercased). Anything else changes
nothing and earns 0 (the observation says the action was invalid). The episode ends at "Buy
Now" with WebShop's reward (in ``info["score"]``, between 0 and 1), scaled by ``reward_scale``
for the learner (10 by default, as in the paper's setup); after ``max_steps`` steps (15) it is
truncated.

Transports: ``"browser"`` (default) executes every action in headless Chromium; ``"http"`` sends
the same requests without a browser, and gives the same observations and rewards, faster. See
docs/envs/webshop.md for the page flow, the reward and the measured speeds.
"""

from __future__ import annotations

import json
import logging
import re
import time
import unicodedata
from dataclasses import dataclass, fields
from typing import Any

import gymnasium as gym

from agentrl.envs import PLACEHOLDER, TEXT_CHARSET, text_space
from agentrl.errors import UserError

from ..action_check import action_problem
from . import oracle
from .browser_transport import BrowserConfig, BrowserTransport, browser_missing
from .http_transport import HttpTransport
from .page_text import SEPARATOR, Clickable, PageView, read_page
from .protocol import Protocol, make_protocol
from .records import Goal
from .server import StoreServer, acquire_server, release_server
from .shop import Shop, ShopSource, load_shop
from .store import Store
from .transport import (
    BrowserCrashed,
    ForeignUrlError,
    StoreUnavailable,
    Transport,
    TransportError,
)

log = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You are a shopping assistant in an online store. Find the product that best matches the "
    "customer's instruction: search for it, open a promising result, check its details, "
    "select the requested options such as size and color, and buy it if the price fits. Each "
    "turn, answer with exactly one action: search[keywords] when the page has a search bar, or "
    "click[name] with one of the page's clickable names."
)
INVALID_ACTION = "Invalid action: it is not available on this page."
CRASHED = "The browser stopped working, so this episode was cut short."
DEFAULT_NUM_PRODUCTS = 2000
_ACTION = re.compile(r"\s*([A-Za-z_]+)\s*\[(.*)\]\s*", re.S)
_ALLOWED = frozenset(TEXT_CHARSET)


@dataclass
class WebShopConfig:
    """Every knob of the env (all are keyword arguments of ``gymnasium.make``)."""

    split: str = "train"  # train | eval | test
    transport: str = "browser"  # browser | http
    max_steps: int = 15
    reward_scale: float = 10.0  # learner's reward = WebShop's score * reward_scale
    num_products: int | None = None  # catalog size; None: 2000 generated, or every official one
    catalog_seed: int = 0
    goals_per_product: int = 2
    data_dir: str | None = None  # a directory holding the official WebShop files
    goal_source: str = "human"  # official files only: human | synthetic
    show_instruction: bool = False  # keep the page's instruction banner in observations
    on_crash: str = "truncate"  # browser dead even after a restart: truncate the episode | raise
    chromedriver: str = "/usr/bin/chromedriver"
    chromium: str = "/usr/bin/chromium"
    page_timeout_s: float = 20.0
    protocol: str = "default"  # default | paper (protocol.py: verl-agent's WebShop protocol)
    reward: str | None = None  # original | fine; None: the protocol's (WebShop's original)

    @property
    def rules(self) -> Protocol:
        """The protocol's behaviours (raises ValueError for an unknown protocol or reward)."""
        return make_protocol(self.protocol, self.reward)

    def validate(self) -> None:
        try:
            rules = self.rules
        except ValueError as exc:
            raise UserError(f"WebShop: {exc}.") from exc
        if rules.reward not in ("original", "fine"):
            raise UserError(f"WebShop reward must be 'original' or 'fine', not {self.reward!r}.")
        if self.split not in ("train", "eval", "test"):
            raise UserError(f"WebShop split must be train, eval or test, not {self.split!r}.")
        if self.transport not in ("browser", "http"):
            raise UserError(f"WebShop transport must be 'browser' or 'http', not "
                            f"{self.transport!r}.")
        if self.max_steps < 1 or self.reward_scale <= 0:
            raise UserError("WebShop needs max_steps >= 1 and reward_scale > 0.")
        if self.on_crash not in ("truncate", "raise"):
            raise UserError(f"WebShop on_crash must be 'truncate' or 'raise', not "
                            f"{self.on_crash!r}.")
        if self.data_dir is None and self.num_products is not None and self.num_products < 10:
            raise UserError("A generated WebShop catalog needs num_products >= 10.")
        if self.transport == "browser":
            reason = browser_missing(BrowserConfig(self.chromedriver, self.chromium))
            if reason is not None:
                raise UserError(f"WebShop's browser transport cannot run: {reason}.")

    @property
    def source(self) -> ShopSource:
        size = self.num_products
        if size is None and self.data_dir is None:
            size = DEFAULT_NUM_PRODUCTS
        return ShopSource(num_products=size, seed=self.catalog_seed,
                          goals_per_product=self.goals_per_product, data_dir=self.data_dir,
                          goal_source=self.goal_source, split_rule=self.rules.split_rule)


def to_charset(text: str) -> str:
    """``text`` with characters outside the observation charset folded to ASCII or dropped."""
    if all(ch in _ALLOWED for ch in text):
        return text
    folded = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in folded if ch in _ALLOWED)


def parse_action(action: str) -> tuple[str, str | None]:
    """WebShop's action syntax: ``name[argument]`` -> ``(name, argument)``; else ``(text, None)``."""
    match = _ACTION.fullmatch(action)
    if match is None:
        return action.strip().lower(), None
    return match.group(1).lower(), " ".join(match.group(2).split())


class WebShopEnv(gym.Env):
    """WebShop on a local store, through a headless browser or plain HTTP (see module doc)."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4, "r_max": 10.0,
                "system_prompt": SYSTEM_PROMPT}

    def __init__(self, config: WebShopConfig | None = None, render_mode: str | None = None,
                 **overrides: Any):
        known = {f.name for f in fields(WebShopConfig)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise UserError(f"WebShop has no option {', '.join(unknown)}; its options are "
                            f"{', '.join(sorted(known))}.")
        base = config or WebShopConfig()
        self.config = WebShopConfig(**{**base.__dict__, **overrides})
        self.config.validate()
        self.rules = self.config.rules
        self.render_mode = render_mode
        self.metadata = {**type(self).metadata, "r_max": float(self.config.reward_scale)}
        self.observation_space = text_space(65536)
        self.action_space = text_space(1024)
        # Heavy things (catalog, server, browser) come on first reset, so that making the env
        # is cheap and picklable arguments are all a worker process needs.
        self._shop: Shop | None = None
        self._server: StoreServer | None = None
        self._transport: Transport | None = None
        self._session: str | None = None
        self._goal: Goal | None = None
        self._goal_index = 0
        self._page: PageView | None = None
        self._clicks: dict[str, Clickable] = {}
        self._searches: list[str] = []
        self._steps = 0
        self._over = False
        self._score = 0.0
        self._reward_info: dict[str, Any] | None = None
        self._last_obs = ""
        self._page_url: str | None = None  # the current page, reopened after a browser crash
        self.browser_restarts = 0  # browsers restarted mid-episode (the agent does not see it)

    # --- gymnasium API --------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        shop = self._ensure_store()
        goals = shop.splits[self.config.split]
        if options and "goal_index" in options:
            index = int(options["goal_index"])
        elif seed is not None:
            index = seed
        else:
            index = int(self.np_random.integers(len(goals)))
        self._goal_index = index % len(goals)
        self._goal = goals[self._goal_index]
        assert self._server is not None
        if self._session is not None:
            self._server.store.close_session(self._session)
        self._session = self._server.store.open_session(self._goal, self.rules.reward,
                                                        self.rules.page_style)
        url = f"{self._server.url}/s/{self._session}"
        try:
            html = self._transport_or_new().open(url)
        except (BrowserCrashed, TransportError) as first:
            log.warning("WebShop: %s; restarting the browser and retrying the reset", first)
            self._drop_transport()
            try:
                html = self._transport_or_new().open(url)
            except TransportError as second:
                raise RuntimeError(f"WebShop could not open the store page twice in a row: "
                                   f"{second}") from second
        self._steps = 0
        self._over = False
        self._score = 0.0
        self._reward_info = None
        self._searches = []
        self._show(html)
        self._page_url = self._transport_url()
        self._last_obs = self._observation()
        return self._last_obs, self._info(won=False)

    def step(self, action: str):
        if self._page is None:
            raise RuntimeError("WebShopEnv.step() called before reset()")
        self._steps += 1
        if self._over:  # the purchase already ended the episode: nothing more happens
            return self._last_obs, 0.0, True, False, self._info(won=self._won)
        html, note = None, None
        problem = action_problem(action, self.action_space.max_length)
        if problem is not None:  # not text, too long or unencodable: never sent anywhere
            note = f"Invalid action: {problem}."
        else:
            name, arg = parse_action(action)
            try:
                html = self._act(name, arg)
                if html is None:
                    note = INVALID_ACTION
            except ForeignUrlError as exc:
                note = f"Refused: {exc}."
            except (BrowserCrashed, StoreUnavailable) as exc:  # recovery failed: a real failure
                return self._crashed(exc)
            except TransportError as exc:  # an error page (414...), a page gone out of step
                note = f"Invalid action: {exc}."
        if html is not None:
            self._show(html)
            self._page_url = self._transport_url()
        reward, terminated = 0.0, False
        if self._page.kind == "done":
            self._over = terminated = True
            self._score = float(self._page.meta.get("score", "0"))
            if self.rules.pay_only_wins:  # verl-agent: 10 for a perfect purchase, else 0
                reward = self.config.reward_scale if self._score == 1.0 else 0.0
            else:
                reward = self._score * self.config.reward_scale
        invalid = note is not None
        if not self.rules.announce_invalid:  # WebShop: the page stays as it was, no message
            note = None
        obs = self._observation()
        self._last_obs = f"{note}{SEPARATOR}{obs}" if note else obs
        truncated = not terminated and self._steps >= self.config.max_steps
        info = self._info(won=self._won, invalid=invalid)
        return self._last_obs, reward, terminated, truncated, info

    def render(self) -> str | None:
        return self._last_obs if self.render_mode == "ansi" else None

    def _act(self, name: str, arg: str | None) -> str | None:
        """Carry a parsed action to the store; the new page's HTML, or None if it is invalid.

        A browser that died (Chromium, a renderer or chromedriver killed or crashed) is
        restarted on the page the episode was on and the action is tried once more: the store
        keeps the session and every page is addressed by its URL, so the episode goes on as if
        nothing happened. The retry is safe even when the first attempt reached the store: a
        search or a click only loads a page, and a purchase is recorded once per session (a
        second one shows the first one's result). A second crash in a row is a real failure.
        """
        for attempt in range(2):
            try:
                return self._send(name, arg)
            except BrowserCrashed as exc:
                if attempt == 1:
                    raise
                self._restart_browser(exc)
        raise AssertionError("unreachable")

    def _send(self, name: str, arg: str | None) -> str | None:
        assert self._page is not None
        if name == "search" and arg and (self._page.has_search_bar or self.rules.search_anywhere):
            if not self._page.has_search_bar:  # WebShop's text env searches from any page
                assert self._server is not None and self._session is not None
                self._show(self._transport_or_new().open(f"{self._server.url}/s/{self._session}"))
            html = self._transport_or_new().search(self._page.search_action or "", arg)
            self._searches.append(arg)
            return html
        if name == "click" and arg is not None and arg.lower() in self._clicks:
            return self._transport_or_new().click(self._clicks[arg.lower()])
        return None

    def _restart_browser(self, exc: BrowserCrashed) -> None:
        """A new browser on the current page (its clickables re-read from the new copy)."""
        started = time.monotonic()
        self._drop_transport()
        if self._page_url is None:
            raise exc
        try:
            html = self._transport_or_new().open(self._page_url)
        except TransportError as again:
            raise BrowserCrashed(f"{exc}; restarting it failed too: {again}") from again
        self._show(html)
        self.browser_restarts += 1
        log.warning("WebShop: %s; restarted the browser on the same page in %.2f s and "
                    "continued the episode", exc, time.monotonic() - started)

    def _transport_url(self) -> str | None:
        return None if self._transport is None else self._transport.current_url

    def close(self) -> None:
        self._drop_transport()
        if self._server is not None:
            if self._session is not None:
                self._server.store.close_session(self._session)
            release_server(self._server)
        self._server = None
        self._session = None
        super().close()

    # --- extras ---------------------------------------------------------------------------------
    def expert_action(self) -> str:
        """The scripted oracle's next action from the current page (see :mod:`.oracle`)."""
        if self._page is None or self._goal is None or self._shop is None:
            raise RuntimeError("call reset() before expert_action()")
        return oracle.next_action(self._page, self._goal, self._shop, self._searches)

    def admissible_actions(self) -> list[str]:
        """``search[...]`` when the page has a search bar, and ``click[name]`` per clickable."""
        if self._over or self._page is None:
            return []
        searchable = self._page.has_search_bar or self.rules.search_anywhere
        actions = [f"search{PLACEHOLDER}"] if searchable else []
        return actions + [f"click[{name}]" for name in self._clicks]

    @property
    def goal(self) -> Goal | None:
        return self._goal

    @property
    def page(self) -> PageView | None:
        return self._page

    @property
    def transport(self) -> Transport | None:
        return self._transport

    @property
    def store(self) -> Store | None:
        return None if self._server is None else self._server.store

    def data_fingerprint(self) -> dict[str, Any]:
        """Which goals this env plays (agentrl.rundir.fingerprint; see fingerprint.py here)."""
        from .fingerprint import shop_fingerprint

        return shop_fingerprint(self.config)

    # --- internals ------------------------------------------------------------------------------
    @property
    def _won(self) -> bool:
        return self._over and self._score == 1.0

    def _ensure_store(self) -> Shop:
        if self._shop is None:
            try:
                self._shop = load_shop(self.config.source)
            except FileNotFoundError as exc:
                raise UserError(f"WebShop data: {exc}") from exc
        if self._server is None or not self._server.running:
            self._drop_transport()
            self._server = acquire_server(self._shop)
        return self._shop

    def _transport_or_new(self) -> Transport:
        if self._transport is None:
            assert self._server is not None
            if self.config.transport == "http":
                self._transport = HttpTransport(self._server.url)
            else:
                self._transport = BrowserTransport(
                    self._server.url,
                    BrowserConfig(self.config.chromedriver, self.config.chromium,
                                  self.config.page_timeout_s))
        return self._transport

    def _drop_transport(self) -> None:
        if self._transport is not None:
            self._transport.close()
        self._transport = None

    def _show(self, html: str) -> None:
        original = self.rules.original_pages  # WebShop's text: banner, stripped nodes, order
        self._page = read_page(html, self.config.show_instruction or original,
                               collapse=not original)
        clicks: dict[str, Clickable] = {}
        for name in self._page.click_names(original_order=original):
            found = self._page.find(name)
            if found is not None:
                clicks[to_charset(name)] = found
        self._clicks = clicks

    def _observation(self) -> str:
        assert self._page is not None
        return to_charset(self._page.text)

    def _crashed(self, exc: TransportError):
        """A browser that cannot be restarted, or a store that does not answer: cut the episode.

        (A browser that died once is restarted by :meth:`_act` without the agent noticing.)
        """
        message = f"{type(exc).__name__}: {exc}"
        log.warning("WebShop: %s; the browser will be restarted at the next reset", message)
        self._drop_transport()
        if self.config.on_crash == "raise":
            raise exc
        self._over = True
        self._last_obs = CRASHED
        info = self._info(won=False)
        info["error"] = message
        return self._last_obs, 0.0, False, True, info

    def _info(self, won: bool, invalid: bool = False) -> dict[str, Any]:
        assert self._goal is not None and self._page is not None
        info: dict[str, Any] = {
            "task": to_charset(self._goal.instruction_text),
            "admissible_actions": self.admissible_actions(),
            "won": bool(won),
            "score": self._score,
            "task_type": self._goal.category,
            "goal_index": self._goal_index,
            "page": self._page.kind,
            "invalid_action": invalid,
        }
        if self._page.kind == "done" and "reward-info" in self._page.meta:
            info["reward_info"] = json.loads(self._page.meta["reward-info"])
        return info
