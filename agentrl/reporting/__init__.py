"""Fair comparisons and the reports that show them: ``agentrl bench`` and ``agentrl report``.

``bench`` (:mod:`.bench`) runs several algorithms like-for-like (same env splits, task seeds,
trajectories per iteration, sampling, model) into ``OUT/<algo>/seed<k>/``; ``report``
(:mod:`.runs` -> :mod:`.document` -> :mod:`.html` / :mod:`.markdown`) turns any set of run
directories into a self-contained HTML page and a Markdown twin with the figures of
:mod:`.figures`. Importing this package is cheap: torch and matplotlib load only when used.
"""

from __future__ import annotations
