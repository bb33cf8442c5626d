"""The models room: model lookup and loading, the lean policy forward, value tokens, LoRA, the
hub and model-file checks, and the token half of constrained decoding (allowed-token sets, tries)."""
