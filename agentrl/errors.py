"""Errors a user can cause.

Anything raised as :class:`UserError` is shown by the CLI as one sentence with a non-zero
exit code and no traceback: a bad config, an unknown env or algorithm, a missing model path,
a missing browser. Everything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake in what the user asked for, explained in one sentence."""


#: The longest piece of a user's value echoed in a message: enough to recognise it, short enough
#: that a megabyte value still gives a one-line error.
SHOWN_CHARS = 200


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters, for echoing a user's value in a sentence."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def cut(text: str, limit: int = SHOWN_CHARS) -> str:
    """The first line of ``text`` cut to ``limit`` characters (an exception's message echoed)."""
    lines = str(text).strip().splitlines()
    first = lines[0] if lines else ""
    return first if len(first) <= limit else f"{first[:limit]}..."
