"""``python -m agentrl.cli`` (and ``torchrun -m agentrl.cli``) is the ``agentrl`` command; the guard
keeps a spawned env worker's re-import of this module free of side effects."""

from agentrl.cli import main

if __name__ == "__main__":
    main()
