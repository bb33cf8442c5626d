"""The browser transport for real: same episodes as HTTP, store-only, crashes, no leftovers.

These tests drive headless Chromium (Debian's ``chromium`` + ``chromium-driver``); CI installs
them (``make system-deps``). They are skipped only where ``/usr/bin/chromedriver`` is absent.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("Stemmer")
pytest.importorskip("selenium")
pytest.importorskip("flask")

import gymnasium as gym  # noqa: E402

import agentrl_envs  # noqa: E402, F401
from agentrl_envs.webshop.env import CRASHED  # noqa: E402
from agentrl_envs.webshop.transport import BrowserCrashed, ForeignUrlError  # noqa: E402

pytestmark = [
    pytest.mark.webshop,
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromedriver"),
                       reason="chromium-driver is not installed (/usr/bin/chromedriver is "
                              "absent); install it with `make system-deps`"),
]
SMALL = {"num_products": 200, "split": "test"}
BROWSER_NAMES = ("chromium", "chromedriver", "chrome_crashpad", "chrome")


def browser_processes() -> dict[int, str]:
    """pid -> state letter of every Chromium/chromedriver process on the machine."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name = raw[raw.find("(") + 1:raw.rfind(")")]
        if name.startswith(BROWSER_NAMES):
            found[int(entry)] = raw[raw.rfind(")") + 2]
    return found


def wait_gone(pids, timeout=10.0) -> list[int]:
    """The pids still present (alive or zombie) after waiting up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    left = list(pids)
    while left and time.monotonic() < deadline:
        left = [p for p in left if os.path.exists(f"/proc/{p}")]
        time.sleep(0.1)
    return left


@pytest.fixture(scope="module", autouse=True)
def no_leftover_browsers():
    """After every test of this module: no Chromium or chromedriver process that a test
    started is left, neither running nor as a zombie."""
    before = set(browser_processes())
    yield
    from agentrl_envs.webshop.browser_transport import close_all_browsers

    close_all_browsers()
    new = set(browser_processes()) - before
    assert wait_gone(new) == []


def all_pids(env) -> list[int]:
    return [p for pids in env.unwrapped.transport.pids().values() for p in pids]


def test_browser_and_http_give_identical_episodes():
    browser = gym.make("agentrl/WebShop-v0", transport="browser", **SMALL)
    http = gym.make("agentrl/WebShop-v0", transport="http", **SMALL)
    purchases = 0
    try:
        for seed in range(5):
            rng = random.Random(seed)
            a, b = browser.reset(seed=seed), http.reset(seed=seed)
            assert a == b
            done, steps = False, 0
            while not done:
                info = a[-1]
                detours = [x for x in info["admissible_actions"]
                           if x not in ("click[buy now]", "search[...]")]
                if detours and rng.random() < 0.3:
                    action = rng.choice(detours)  # wander: tabs, other products, pages, options
                else:
                    action = http.unwrapped.expert_action()
                a, b = browser.step(action), http.step(action)
                assert a == b, f"seed {seed}, step {steps}: {action}"
                done = a[2] or a[3]
                steps += 1
            purchases += a[2]
            assert a[2] or steps == 15  # bought, or cut by the step limit after wandering
        assert purchases >= 3  # rewards were compared on real purchases
    finally:
        browser.close()
        http.close()


class _Elsewhere(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's naming)
        body = b"<html><body data-render='x'>somewhere else</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_browser_visits_only_the_store():
    env = gym.make("agentrl/WebShop-v0", transport="browser", **SMALL)
    # Threaded: Chromium may open a spare connection and leave it idle, which would block a
    # single-threaded server (and its shutdown) for good.
    other = ThreadingHTTPServer(("127.0.0.1", 0), _Elsewhere)
    other.daemon_threads = True
    threading.Thread(target=other.serve_forever, daemon=True).start()
    elsewhere = f"http://127.0.0.1:{other.server_port}/"
    try:
        obs, _ = env.reset(seed=0)
        transport = env.unwrapped.transport
        driver = transport._driver
        with pytest.raises(ForeignUrlError):
            transport.open(elsewhere)  # refused before navigating
        with pytest.raises(ForeignUrlError):
            transport.open("http://example.com/s/x")
        assert driver.current_url.startswith(transport.guard.origin + "/s/")
        # A page that wanders off (here pushed by a script) is refused after the fact and the
        # browser is sent back to the store page it was on.
        driver.execute_script("window.location.href = arguments[0]", elsewhere)
        with pytest.raises(ForeignUrlError):
            transport._settle(previous=transport._render)
        assert driver.current_url.startswith(transport.guard.origin + "/s/")
        # Chromium itself cannot leave loopback: a public address fails at once (dead proxy).
        start = time.monotonic()
        try:
            driver.get("http://93.184.215.14/")
        except Exception:
            pass
        assert time.monotonic() - start < 10
        assert "somewhere" not in driver.page_source
        # and the env still works afterwards
        env.reset(seed=1)
        assert env.step("search[green tea]")[4]["page"] == "results"
    finally:
        other.shutdown()
        env.close()


@pytest.mark.parametrize("victim", ["chromedriver", "chromium"])
def test_crash_mid_episode_is_reported_and_recovered(victim):
    env = gym.make("agentrl/WebShop-v0", transport="browser", **SMALL)
    try:
        env.reset(seed=0)
        env.step(env.unwrapped.expert_action())
        old = all_pids(env)
        os.kill(env.unwrapped.transport.pids()[victim][0], signal.SIGKILL)
        obs, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
        assert obs == CRASHED and reward == 0.0 and truncated and not terminated
        assert info["error"].startswith("BrowserCrashed")
        assert wait_gone(old) == []  # every old process gone: no zombie either
        assert env.unwrapped.transport is None  # restarted lazily at the next reset
        obs, info = env.reset(seed=1)
        assert obs == "WebShop [SEP] Search" and set(all_pids(env)).isdisjoint(old)
        done = False
        while not done:
            _, _, terminated, truncated, info = env.step(env.unwrapped.expert_action())
            done = terminated or truncated
        assert info["won"]
    finally:
        env.close()


def test_crash_can_raise_instead():
    env = gym.make("agentrl/WebShop-v0", transport="browser", on_crash="raise", **SMALL)
    try:
        env.reset(seed=0)
        old = all_pids(env)
        os.kill(env.unwrapped.transport.pids()["chromedriver"][0], signal.SIGKILL)
        with pytest.raises(BrowserCrashed):
            env.step(env.unwrapped.expert_action())
        assert wait_gone(old) == []
        assert env.reset(seed=0)[0] == "WebShop [SEP] Search"
    finally:
        env.close()


def test_close_stops_every_process():
    env = gym.make("agentrl/WebShop-v0", transport="browser", **SMALL)
    env.reset(seed=0)
    pids = all_pids(env)
    assert len(pids) >= 4  # reaper, chromedriver, chromium and its helpers
    env.close()
    assert wait_gone(pids) == []


def test_a_killed_owner_leaves_no_browser(tmp_path):
    script = textwrap.dedent("""
        import json, os
        import gymnasium as gym, agentrl_envs
        env = gym.make("agentrl/WebShop-v0", transport="browser", num_products=100)
        env.reset(seed=0)
        print(json.dumps(env.unwrapped.transport.pids()), flush=True)
        os._exit(0)  # dies like a killed trainer: no close(), no atexit
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=True)
    pids = [p for group in json.loads(out.stdout.strip().splitlines()[-1]).values()
            for p in group]
    assert len(pids) >= 4
    assert wait_gone(pids) == []
