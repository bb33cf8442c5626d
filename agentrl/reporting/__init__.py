"""The reports of fair comparisons: what ``agentrl report`` reads from ``agentrl bench`` outputs.

``bench`` (:mod:`agentrl.bench`, beside the trainer: this package never trains) runs several
algorithms like-for-like (same env splits, task seeds, trajectories per iteration, sampling,
model) into ``OUT/<algo>/seed<k>/``; ``report``
(:mod:`.runs` -> :mod:`.document` -> :mod:`.html` / :mod:`.markdown`) turns any set of run
directories into a self-contained HTML page and a Markdown twin with the figures of
:mod:`.figures`. Importing this package is cheap: torch and matplotlib load only when used.
"""

from __future__ import annotations
