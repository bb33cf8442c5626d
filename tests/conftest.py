"""Shared fixtures: the embedded tokenizer and tiny random models (fast, CPU)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tokenizer():
    from transformers.utils import logging as hf_logging

    from agentrl.models.loading import load_tokenizer, resolve_model

    hf_logging.disable_progress_bar()
    return load_tokenizer(resolve_model("tiny"))


@pytest.fixture
def fresh_tokenizer(tokenizer):
    """A private copy, for tests that add tokens."""
    import copy

    return copy.deepcopy(tokenizer)


@pytest.fixture
def tiny_model(tokenizer):
    from agentrl.models.loading import build_tiny_model

    return build_tiny_model(len(tokenizer), seed=0)


def pytest_terminal_summary(terminalreporter):
    """Say which vLLM CPU kernel paths the weight-sync tests exercised on this machine."""
    import sys

    module = sys.modules.get("test_vllm_backend") or sys.modules.get("tests.test_vllm_backend")
    paths = getattr(module, "PATHS_RAN", None)
    if paths:
        terminalreporter.section("vLLM weight-sync paths exercised")
        for line in paths:
            terminalreporter.write_line(line)
