"""The training room: the run config, the composition root (:mod:`.compose`), the trainer, SFT,
sharded checkpoints and metric loggers."""
