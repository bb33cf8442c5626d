"""Errors a user can cause.

Anything raised as :class:`UserError` is shown by the CLI as one sentence with a non-zero
exit code and no traceback: a bad config, an unknown env or algorithm, a missing model path,
a missing browser. Everything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake in what the user asked for, explained in one sentence."""
