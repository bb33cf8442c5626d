"""The parallel room: torch.distributed helpers, FSDP2 sharding and the memory levers (offload)."""
