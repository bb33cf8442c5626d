"""Constrained action decoding: only admissible actions, exact log-probs."""

import math

import torch

from agentrl.backends.base import SamplingParams
from agentrl.backends.hf import HFBackend
from agentrl.envs import is_admissible
from agentrl.models.policy import Policy, ScoreItem
from agentrl.rollout.action_format import ActionFormat
from agentrl.rollout.constrained import ConstraintBuilder

EOT = 2
ADMISSIBLE = ["go to cabinet 1", "go to cabinet 10", "go to countertop 2", "take apple 1 from cabinet 1",
              "look", "inventory", "examine cabinet 1"]


def _setup(model, tokenizer):
    fmt = ActionFormat()
    builder = ConstraintBuilder(tokenizer, fmt.render, EOT)
    backend = HFBackend(model, stop_ids=[EOT], pad_id=EOT, seed=0)
    return fmt, builder, backend


def test_random_model_only_writes_admissible_actions(tiny_model, tokenizer):
    fmt, builder, backend = _setup(tiny_model, tokenizer)
    prompt = tokenizer("You are in the kitchen.")["input_ids"]
    seen = set()
    for _ in range(6):
        cursors = [builder.cursor(ADMISSIBLE) for _ in range(8)]
        gens = backend.generate([prompt] * 8, SamplingParams(temperature=1.5, max_new_tokens=4), cursors)
        for gen in gens:
            assert gen.finished and gen.token_ids[-1] == EOT
            reply = tokenizer.decode(gen.token_ids[:-1])
            action = fmt.parse(reply)
            assert reply == fmt.render(action) and action in ADMISSIBLE
            seen.add(action)
    assert len(seen) >= 4  # a random model spreads over the list (prefix sharing is not uniform)


def test_recorded_logprobs_equal_trainer_recomputation_under_the_constraint(tiny_model, tokenizer):
    fmt, builder, backend = _setup(tiny_model, tokenizer)
    prompts = [tokenizer("You are in the kitchen.")["input_ids"], tokenizer("Where is the apple?")["input_ids"]]
    for temperature in (1.0, 0.6):
        cursors = [builder.cursor(ADMISSIBLE) for _ in prompts]
        gens = backend.generate(prompts, SamplingParams(temperature=temperature, max_new_tokens=64), cursors)
        policy = Policy(tiny_model, tokenizer, None, temperature=temperature)
        items = [ScoreItem(p, g.token_ids, g.allowed) for p, g in zip(prompts, gens, strict=True)]
        with torch.no_grad():
            scores = policy.score(items)
        recorded = torch.tensor([lp for g in gens for lp in g.logprobs])
        # tolerance: fp32 with left padding + KV cache vs one unpadded pass
        torch.testing.assert_close(scores.logprobs, recorded, rtol=0, atol=1e-4)
        # and the constraint matters: unconstrained log-probs are much lower
        free = policy.score([ScoreItem(p, g.token_ids) for p, g in zip(prompts, gens, strict=True)])
        assert float((free.logprobs - scores.logprobs).detach().sum()) < -1.0


def test_a_single_admissible_action_has_log_prob_zero(tiny_model, tokenizer):
    _, builder, backend = _setup(tiny_model, tokenizer)
    prompt = tokenizer("One way out.")["input_ids"]
    gen = backend.generate([prompt], SamplingParams(max_new_tokens=64), [builder.cursor(["go to hall"])])[0]
    assert tokenizer.decode(gen.token_ids) == "<action>go to hall</action><|im_end|>"
    assert all(lp == 0.0 for lp in gen.logprobs)
    with torch.no_grad():
        scores = Policy(tiny_model, tokenizer).score([ScoreItem(prompt, gen.token_ids, gen.allowed)])
    assert float(scores.logprobs.abs().max()) == 0.0


def test_placeholder_action_takes_free_text(tiny_model, tokenizer):
    fmt, builder, backend = _setup(tiny_model, tokenizer)
    admissible = ["search[...]", "click[back to search]"]
    prompt = tokenizer("WebShop [SEP] Search")["input_ids"]
    cursors = [builder.cursor(admissible) for _ in range(6)]
    gens = backend.generate([prompt] * 6, SamplingParams(temperature=1.0, max_new_tokens=12), cursors)
    for gen in gens:
        assert gen.finished and gen.token_ids[-1] == EOT
        action = fmt.parse(tokenizer.decode(gen.token_ids[:-1]))
        assert action is not None and is_admissible(action, admissible), action
    policy = Policy(tiny_model, tokenizer)
    with torch.no_grad():
        scores = policy.score([ScoreItem(prompt, g.token_ids, g.allowed) for g in gens])
    recorded = torch.tensor([lp for g in gens for lp in g.logprobs])
    torch.testing.assert_close(scores.logprobs, recorded, rtol=0, atol=1e-4)


def test_is_admissible_placeholder_rules():
    adm = ["search[...]", "click[buy now]"]
    assert is_admissible("search[red shoes]", adm)
    assert not is_admissible("search[]", adm)
    assert not is_admissible("search[a]b]", adm)
    assert is_admissible("click[buy now]", adm)
    assert not is_admissible("click[buy]", adm)
    assert is_admissible("anything", None)


def test_constrained_log_probs_are_the_logits_renormalised_over_the_allowed_set(tiny_model, tokenizer):
    """By hand: at each reply position, log p = logit[token] - logsumexp(logits[allowed]), from
    one plain forward of the model (no Policy, no backend code), and exactly 0 where one token
    is allowed."""
    fmt, builder, backend = _setup(tiny_model, tokenizer)
    prompt = tokenizer("Choose a word.")["input_ids"]
    admissible = ["look", "inventory", "examine cabinet 1"]
    gen = backend.generate([prompt], SamplingParams(temperature=1.0, max_new_tokens=64),
                           [builder.cursor(admissible)])[0]
    assert gen.finished and fmt.parse(tokenizer.decode(gen.token_ids[:-1])) in admissible
    with torch.no_grad():
        logits = tiny_model(torch.tensor([prompt + gen.token_ids])).logits[0].double()
    expected = []
    for k, (token, allowed) in enumerate(zip(gen.token_ids, gen.allowed, strict=True)):
        row = logits[len(prompt) - 1 + k]  # the logits that predict reply token k
        assert not allowed.exclude and token in allowed.ids
        ids = list(allowed.ids)
        by_hand = float(row[token] - torch.logsumexp(row[ids], dim=0))
        if len(ids) == 1:
            assert by_hand == 0.0
        expected.append(by_hand)
    assert any(len(a.ids) > 1 for a in gen.allowed)  # at least one real choice was made
    for got, want in zip(gen.logprobs, expected, strict=True):
        assert math.isclose(got, want, abs_tol=1e-4), (got, want)


def _walk(cursor, budget, choose):
    """Drive a cursor to the end, taking ``choose(allowed)`` at each step; the token ids."""
    ids = []
    while not cursor.finished:
        entry = cursor.allowed(budget - len(ids))
        token = choose(entry)
        assert entry.contains(token)
        cursor.advance(token)
        ids.append(token)
        assert len(ids) <= budget
    return ids


def test_free_text_can_never_be_blank_or_end_the_tag_early(tokenizer):
    """An adversarial sampler inside ``search[...]``: it takes a blank token whenever one is allowed
    (else the closing bracket, else any token), or a token containing ``<``. Whatever it does, the
    reply parses to an admissible action within the budget (``search[ ]`` is inadmissible once
    whitespace is normalised, and ``</action>`` in the query would cut the tag short)."""
    fmt = ActionFormat()
    builder = ConstraintBuilder(tokenizer, fmt.render, EOT)
    admissible = ["search[...]"]
    space = tokenizer(" ", add_special_tokens=False)["input_ids"][0]
    newline = tokenizer("\n", add_special_tokens=False)["input_ids"][0]
    lt = tokenizer("</", add_special_tokens=False)["input_ids"][0]
    word = tokenizer(" shoes", add_special_tokens=False)["input_ids"][0]
    assert space in builder.free_blank and newline in builder.free_blank and word not in builder.free_blank
    assert lt in builder.free_banned

    def blank_first(entry):
        for token in (space, newline, lt):
            if entry.contains(token):
                return token
        if not entry.exclude:
            return entry.ids[0]  # a forced token (the suffix)
        return word

    for budget_extra in (0, 1, 5):
        cursor = builder.cursor(admissible)
        budget = cursor.max_length + budget_extra
        ids = _walk(cursor, budget, blank_first)
        action = fmt.parse(tokenizer.decode(ids[:-1]))
        assert action is not None and is_admissible(action, admissible), (budget_extra, action)
        # blanks were taken while the budget allowed (normalised to one space), then a word was
        # forced into the last free slot
        assert action == "search[ shoes]"
