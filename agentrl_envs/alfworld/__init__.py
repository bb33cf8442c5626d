"""ALFWorld's household tasks on TextWorld's engine: ``agentrl/ALFWorld-v0``.

Modules: ``catalog`` (rooms, receptacles, objects, task types, ALFWorld's tables),
``generator`` (games, knobs, splits), ``engine`` and ``grammar`` (ALFWorld's TextWorld stack,
faster), ``expert`` (planner-based expert), ``official`` (official game files), ``export``
(generated games written as files), ``env`` (the Gymnasium env). Importing this package
imports neither TextWorld nor ALFWorld; the env loads them on its first reset.
"""
