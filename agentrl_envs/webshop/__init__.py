"""WebShop as a text env on a real local web store (``agentrl/WebShop-v0``).

Modules, in the order data flows through them:

* :mod:`.records` - the Product and Goal records every part shares;
* :mod:`.vocabulary`, :mod:`.catalog`, :mod:`.goals` - the generated catalog, goals and splits;
* :mod:`.official` - the loader of WebShop's own JSON files;
* :mod:`.shop` - products + goals + search index, built once per process;
* :mod:`.search` - BM25 search (bm25s, Porter stemming, Lucene's k1/b);
* :mod:`.colors`, :mod:`.nouns`, :mod:`.reward` - WebShop's reward;
* :mod:`.pages`, :mod:`.store`, :mod:`.server` - the web store and its 127.0.0.1 server;
* :mod:`.page_text` - a page's text observation, clickables and state;
* :mod:`.transport`, :mod:`.http_transport`, :mod:`.browser_transport`,
  :mod:`.chromedriver_reaper` - how actions reach the store;
* :mod:`.oracle` - the scripted shopper; :mod:`.env` - the Gymnasium env.

Importing this package imports nothing heavy; ``gymnasium.make("agentrl/WebShop-v0")`` loads
:mod:`.env`.
"""
