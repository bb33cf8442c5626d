"""``python -m agentrl`` is the ``agentrl`` command.

It also matters for env workers: they are spawned processes, which re-import the parent's main
module; this file keeps that import free of side effects (the CLI only starts under
``if __name__ == "__main__"``), so a worker does not run the command line again.
"""

from agentrl.cli import main

if __name__ == "__main__":
    main()
