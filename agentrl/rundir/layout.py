"""What a run directory holds, named once: every file and folder a run writes at its top, and
the phases its ``time/*`` records time. Readers (resume, the bench, the report) take the names
from here."""

from __future__ import annotations

CONFIG_FILE = "config.yaml"  # the resolved RunConfig
METRICS_FILE = "metrics.jsonl"  # one record per iteration
SUMMARY_FILE = "summary.json"  # final numbers and the fingerprints
FINGERPRINT_FILE = "fingerprint.json"  # which tasks train and eval played
SAMPLES_DIR = "samples"  # a few trajectories per iteration, as text
EVAL_DIR = "eval"  # evaluation episodes with their value traces
CHECKPOINTS_DIR = "checkpoints"  # iter_N folders and the latest pointer
STATE_FILE = "trainer_state.pt"  # written last: its presence marks a checkpoint complete
LATEST = "latest"  # the name of the newest checkpoint

#: The phases of one iteration, in the order they run (each recorded as ``time/<phase>``), with
#: the names readers see.
PHASE_NAMES: dict[str, str] = {
    "rollout": "rollout",
    "old_logprob": "old log-probs",
    "value_inference": "value inference",
    "ref_logprob": "reference log-probs",
    "actor_update": "actor update",
    "critic_update": "critic update",
}
PHASES = tuple(PHASE_NAMES)
