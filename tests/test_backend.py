"""The transformers backend: log-probs, banned ids, top-p, temperature."""

import torch

from agentrl.backends.base import SamplingParams
from agentrl.backends.hf import HFBackend, top_p_filter

EOT = 2


def _prompts(tokenizer):
    texts = ["You are in the kitchen.", "Passages lead to the hall and the study, and you carry a key.", "Look"]
    return [tokenizer(t)["input_ids"] for t in texts]


def _fresh_logprobs(model, prompt, tokens, banned=(), temperature=1.0):
    with torch.no_grad():
        logits = model(torch.tensor([list(prompt) + list(tokens)])).logits[0].float()
    logits[:, list(banned)] = float("-inf")
    logp = torch.log_softmax(logits / temperature, -1)
    p = len(prompt)
    return [float(logp[p - 1 + j, t]) for j, t in enumerate(tokens)]


def test_recorded_logprobs_equal_a_fresh_forward_pass(tiny_model, tokenizer):
    backend = HFBackend(tiny_model, stop_ids=[EOT], pad_id=EOT, banned_ids=[7, 8], seed=3)
    prompts = _prompts(tokenizer)
    for temperature in (1.0, 0.7):
        gens = backend.generate(prompts, SamplingParams(temperature=temperature, max_new_tokens=10))
        for prompt, gen in zip(prompts, gens, strict=True):
            assert len(gen.token_ids) == len(gen.logprobs) > 0
            ref = _fresh_logprobs(tiny_model, prompt, gen.token_ids, banned=[7, 8], temperature=temperature)
            # tolerance: fp32, left padding and KV cache vs one unpadded pass
            assert max(abs(a - b) for a, b in zip(ref, gen.logprobs, strict=True)) < 1e-4


def _bias_towards(model, token, prompts):
    """Make ``token`` the overwhelming favourite after every prompt."""
    with torch.no_grad():
        hidden = torch.cat([model.model(torch.tensor([p])).last_hidden_state[0] for p in prompts])
        direction = hidden.mean(0)
        model.get_output_embeddings().weight[token] = 60 * direction / direction.norm() ** 2


def test_banned_ids_are_never_sampled(tiny_model, tokenizer):
    prompts = _prompts(tokenizer) * 4
    favourite = 1234
    _bias_towards(tiny_model, favourite, prompts)
    free = HFBackend(tiny_model, stop_ids=[EOT], pad_id=EOT, seed=0)
    gens = free.generate(prompts, SamplingParams(max_new_tokens=8))
    sampled = [t for g in gens for t in g.token_ids]
    assert sampled.count(favourite) > len(sampled) // 2  # without the ban it dominates
    banned = HFBackend(tiny_model, stop_ids=[EOT], pad_id=EOT, banned_ids=[favourite], seed=0)
    gens = banned.generate(prompts, SamplingParams(max_new_tokens=8))
    assert all(favourite not in g.token_ids for g in gens)


def test_generation_stops_at_end_of_turn(tiny_model, tokenizer):
    prompts = _prompts(tokenizer)
    _bias_towards(tiny_model, EOT, prompts)
    backend = HFBackend(tiny_model, stop_ids=[EOT], pad_id=EOT, seed=0)
    gens = backend.generate(prompts, SamplingParams(max_new_tokens=8))
    for gen in gens:
        if gen.finished:
            assert gen.token_ids[-1] == EOT and EOT not in gen.token_ids[:-1]
    assert any(g.finished for g in gens)


def test_greedy_takes_the_argmax_of_a_fresh_forward(tiny_model, tokenizer):
    """Greedy replies are the argmax at every step of one plain forward over prompt + reply so far
    (worked out here without the backend's KV cache or padding)."""
    backend = HFBackend(tiny_model, stop_ids=[EOT], pad_id=EOT)
    gens = backend.generate(_prompts(tokenizer), SamplingParams(temperature=0.0, max_new_tokens=6))
    for prompt, gen in zip(_prompts(tokenizer), gens, strict=True):
        ids = list(prompt)
        for token in gen.token_ids:
            with torch.no_grad():
                logits = tiny_model(torch.tensor([ids])).logits[0, -1]
            assert token == int(logits.argmax())
            ids.append(token)


def test_sampling_stream_is_a_function_of_the_seed_alone(tiny_model, tokenizer):
    """What exact resume rests on: after ``reseed(s)`` the backend samples the same replies whatever
    it drew before, another backend seeded with ``s`` samples them too, and another seed does not."""
    params = SamplingParams(temperature=1.0, max_new_tokens=8)
    prompts = _prompts(tokenizer) * 3
    first = HFBackend(tiny_model, stop_ids=[EOT], pad_id=EOT, seed=0)
    first.reseed(11)
    reference = [g.token_ids for g in first.generate(prompts, params)]
    first.generate(prompts, params)  # more draws from the stream
    first.reseed(11)
    assert [g.token_ids for g in first.generate(prompts, params)] == reference
    second = HFBackend(tiny_model, stop_ids=[EOT], pad_id=EOT, seed=5)
    second.reseed(11)
    assert [g.token_ids for g in second.generate(prompts, params)] == reference
    second.reseed(12)
    # a random tiny model's next-token distribution is nearly uniform over ~49k ids: another seed
    # shares (almost) no reply
    other = [g.token_ids for g in second.generate(prompts, params)]
    assert sum(a == b for a, b in zip(other, reference, strict=True)) <= 1


def test_top_p_keeps_the_smallest_nucleus():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    kept = top_p_filter(torch.log(probs), 0.75)
    # 0.5 < 0.75, 0.5 + 0.3 >= 0.75: the nucleus is the first two tokens
    assert torch.isfinite(kept).tolist() == [[True, True, False, False]]
    assert torch.isfinite(top_p_filter(torch.log(probs), 0.1)).tolist() == [[True, False, False, False]]


def test_generation_copy_in_another_dtype_follows_sync(tiny_model, tokenizer):
    backend = HFBackend(tiny_model, stop_ids=[EOT], pad_id=EOT, dtype=torch.bfloat16)
    assert backend.model is not tiny_model and next(backend.model.parameters()).dtype == torch.bfloat16
    with torch.no_grad():
        tiny_model.get_output_embeddings().weight.add_(1.0)
    backend.sync_weights()
    torch.testing.assert_close(backend.model.get_output_embeddings().weight.float(),
                               tiny_model.get_output_embeddings().weight, rtol=1e-2, atol=1e-2)


def test_a_separate_copy_samples_bit_for_bit_as_the_policy_itself(tiny_model, tokenizer):
    """The asynchronous worker's copy (``separate``) must compute exactly as the policy's own
    weights: same replies and the very same float log-probs. A copy frozen with
    ``requires_grad_(False)`` did not: torch's matmul folds a non-contiguous 3-D input
    differently when the weight does not require grad, and the log-probs moved by ~1e-8."""
    params = SamplingParams(temperature=1.0, max_new_tokens=10)
    prompts = _prompts(tokenizer) * 2
    shared = HFBackend(tiny_model, stop_ids=[EOT], pad_id=EOT, seed=4)
    separate = HFBackend(tiny_model, stop_ids=[EOT], pad_id=EOT, seed=4, separate=True)
    assert separate.model is not tiny_model
    assert [p.requires_grad for p in separate.model.parameters()] == [p.requires_grad for p in tiny_model.parameters()]
    a, b = shared.generate(prompts, params), separate.generate(prompts, params)
    assert [g.token_ids for g in a] == [g.token_ids for g in b]
    assert [g.logprobs for g in a] == [g.logprobs for g in b]


def test_auto_generation_dtype_takes_bf16_only_where_the_cpu_has_it(monkeypatch):
    """bf16 is emulated on AVX2-only CPUs (3-5x slower than fp32 there, docs/benchmarks.md):
    ``auto`` copies to bf16 for generation only on CPUs with native bf16."""
    from agentrl.training import compose as build
    cpu, fp32, bf16 = torch.device("cpu"), torch.float32, torch.bfloat16
    monkeypatch.setattr(build, "cpu_has_native_bf16", lambda: False)
    assert build.generation_dtype("auto", fp32, cpu) == fp32
    monkeypatch.setattr(build, "cpu_has_native_bf16", lambda: True)
    assert build.generation_dtype("auto", fp32, cpu) == bf16
    assert build.generation_dtype("auto", bf16, cpu) == bf16  # already bf16: no copy
    assert build.generation_dtype("same", fp32, cpu) == fp32
    assert build.generation_dtype("bfloat16", fp32, cpu) == bf16


def test_trainer_close_releases_the_generation_copy(tmp_path, monkeypatch):
    """Whoever makes a backend closes it: the trainer's close gives back the bf16 generation copy
    (a vLLM engine's memory goes the same way, tests/test_vllm_backend.py), and leaves the
    policy's own model alone."""
    import agentrl.training.trainer as trainer_module
    from agentrl.training.config import build_config

    made: list[HFBackend] = []
    real = trainer_module.make_backend

    def make_backend(policy, cfg, seed, model_cfg=None):
        made.append(real(policy, cfg, seed, model_cfg))
        return made[-1]

    monkeypatch.setattr(trainer_module, "make_backend", make_backend)
    config = build_config(algo="grpo", env="keydoor", model="tiny", overrides=[
        f"train.run_dir={tmp_path / 'run'}", "train.iterations=1", "train.eval_episodes=0",
        "rollout.tasks_per_iteration=1", "rollout.max_turns=2", "rollout.backend=hf",
        "rollout.generation_dtype=bfloat16"])
    trainer = trainer_module.Trainer(config)
    (backend,) = made
    assert backend.own_copy and backend.model is not trainer.policy.model
    trainer.close()
    assert backend.model is None
    assert next(trainer.policy.model.parameters()).dtype == torch.float32
