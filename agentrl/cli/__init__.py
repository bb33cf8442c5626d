"""The cli room: every command (:mod:`.commands`), preflight checks, checkpoint settings. The only
place that knows the command line and the only one that imports typer or rich."""

from agentrl.cli.commands import app, main

__all__ = ["app", "main"]
