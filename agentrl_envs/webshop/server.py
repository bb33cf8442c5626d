"""Serving the store on 127.0.0.1, one server per shop per process, shut down cleanly.

The server is werkzeug's threaded WSGI server in a daemon thread, bound to the loopback address
on a port the OS picks (port 0), so nothing outside the machine can reach it and parallel test
runs never collide on a port. Envs of one process that use the same shop share one server
(:func:`acquire_server` / :func:`release_server` count the users; the last release stops it), and
any server still running at interpreter exit is stopped by an ``atexit`` hook.
"""

from __future__ import annotations

import atexit
import threading

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from .shop import Shop, ShopSource
from .store import Store

LOOPBACK = "127.0.0.1"


class _QuietHandler(WSGIRequestHandler):
    """No access log: one line per click would drown a training run's output."""

    def log_request(self, *args: object, **kwargs: object) -> None:
        pass


class StoreServer:
    """A :class:`Store` served over HTTP on ``127.0.0.1:<free port>``."""

    def __init__(self, shop: Shop):
        self.store = Store(shop)
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> StoreServer:
        if self._server is None:
            self._server = make_server(LOOPBACK, 0, self.store.app, threaded=True,
                                       request_handler=_QuietHandler)
            self._thread = threading.Thread(target=self._server.serve_forever,
                                             name="webshop-store", daemon=True)
            self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the store server is not running")
        return self._server.server_port

    @property
    def url(self) -> str:
        """The store's origin, e.g. ``http://127.0.0.1:41234``."""
        return f"http://{LOOPBACK}:{self.port}"

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)


_servers: dict[ShopSource, tuple[StoreServer, int]] = {}
_lock = threading.Lock()


def acquire_server(shop: Shop) -> StoreServer:
    """The running server of ``shop`` in this process, started on first use."""
    with _lock:
        server, users = _servers.get(shop.source, (None, 0))
        if server is None or not server.running:
            server, users = StoreServer(shop).start(), 0
        _servers[shop.source] = (server, users + 1)
        return server


def release_server(server: StoreServer) -> None:
    """Give back a server from :func:`acquire_server`; the last user's release stops it."""
    with _lock:
        for source, (known, users) in list(_servers.items()):
            if known is server:
                if users <= 1:
                    del _servers[source]
                    server.stop()
                else:
                    _servers[source] = (known, users - 1)
                return
    server.stop()


@atexit.register
def stop_all_servers() -> None:
    """Stop every server this process still runs (at interpreter exit, or in tests)."""
    with _lock:
        servers = [s for s, _ in _servers.values()]
        _servers.clear()
    for server in servers:
        server.stop()
