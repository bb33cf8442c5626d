"""The cli room: the commands on one typer app (:mod:`.common`), in the order ``agentrl --help``
lists them (:mod:`.commands`, :mod:`.demos`, :mod:`.bench`, :mod:`.report`), the bench's live
view, preflight checks, checkpoint settings. The only place that knows the command line and the
only one that imports typer or rich."""

# isort: off
from agentrl.cli import commands  # noqa: F401  (each module's commands register on the app)
from agentrl.cli import demos  # noqa: F401
from agentrl.cli import bench  # noqa: F401
from agentrl.cli import report  # noqa: F401
# isort: on
from agentrl.cli.common import app

__all__ = ["app", "main"]


def main() -> None:
    app()
