"""The rollout room: the engine and env pool, trajectories, prompting, conversation mode, the action
format and its validity, the rollout half of constrained decoding, evaluation and demonstrations."""
