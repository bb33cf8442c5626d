"""Conversation mode: each prompt is the previous prompt + the reply as written + the next
observation message, at the token level, on the embedded tokenizer's template and a Qwen2.5 one."""

import copy

import gymnasium as gym
import pytest

from agentrl.backends.hf import HFBackend
from agentrl.envs import text_space
from agentrl.errors import UserError
from agentrl.rollout.action_format import ActionFormat
from agentrl.rollout.constrained import ConstraintBuilder
from agentrl.rollout.conversation import ConversationBuilder, turn_delta
from agentrl.rollout.engine import EnvPool, RolloutConfig, RolloutEngine, Task
from agentrl.rollout.prompting import PromptBuilder, end_of_turn_id

#: Qwen2.5's chat template without the tool branches (the parts a plain chat renders).
QWEN25_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) or (message.role == 'assistant') %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


class EndlessEnv(gym.Env):
    metadata = {"r_max": 1.0}

    def __init__(self):
        self.observation_space = text_space()
        self.action_space = text_space()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return f"start of task {seed}", self._info()

    def step(self, action):
        self.t += 1
        return f"obs {self.t} after {action}", 0.0, False, False, self._info()

    def _info(self):
        return {"task": "wait a while", "admissible_actions": ["wait", "push the red button"]}


def _engine(model, tokenizer, mode="constrained", reuse=False, **cfg):
    config = RolloutConfig(**{"max_new_tokens": 8, "history": "conversation", "action_mode": mode, **cfg})
    fmt = ActionFormat()
    eot = end_of_turn_id(tokenizer)
    backend = HFBackend(model, stop_ids=[eot], pad_id=eot, seed=0, reuse_prefixes=reuse)
    constraints = ConstraintBuilder(tokenizer, fmt.render, eot) if mode == "constrained" else None
    window = PromptBuilder(tokenizer, fmt, "Test system.", 1, config.max_prompt_tokens)
    conv = ConversationBuilder(tokenizer, fmt, "Test system.", config.max_prompt_tokens, config.list_admissible)
    return RolloutEngine(EnvPool(EndlessEnv), backend, window, fmt, config, constraints, conv)


def _assert_extensions(traj):
    for before, after in zip(traj.turns, traj.turns[1:], strict=False):
        written = before.prompt_ids + before.action_ids
        assert after.prompt_ids[:len(written)] == written
    last = traj.turns[-1]
    if traj.bootstrap_prompt_ids is not None:
        assert traj.bootstrap_prompt_ids[:last.num_tokens] == last.prompt_ids + last.action_ids
    final = traj.final_ids
    for turn in traj.turns:
        assert final[:turn.num_tokens] == turn.prompt_ids + turn.action_ids


@pytest.mark.parametrize("template", ["embedded", "qwen2.5"])
def test_turn_delta_and_extension_reproduce_the_chat_template(tokenizer, template):
    tok = copy.deepcopy(tokenizer)
    if template == "qwen2.5":
        tok.chat_template = QWEN25_TEMPLATE
    delta = turn_delta(tok, "S")
    assert delta.after_text.endswith("<|im_start|>assistant\n") and "user" in delta.before_text
    builder = ConversationBuilder(tok, ActionFormat(), "S", 4096)
    prompt = builder.first("the task", "first obs", ["wait", "go"])
    replies = ["<action>wait</action>", "<action>go</action>"]
    for step, reply in enumerate(replies, start=2):
        reply_ids = tok(reply, add_special_tokens=False)["input_ids"] + [delta.end_of_turn]
        nxt = builder.extend(prompt, reply_ids, reply, f"obs {step}", ["wait", "go"], step)
        assert nxt.ids[:len(prompt.ids) + len(reply_ids)] == prompt.ids + reply_ids  # token-level extension
        prompt = nxt
    rendered = tok.apply_chat_template(prompt.messages, tokenize=False, add_generation_prompt=True)
    assert prompt.text == rendered  # the same chat a fresh render gives
    assert tok.decode(prompt.ids) == rendered
    # a reply cut before its end-of-turn token gets one written after it (a prompt token)
    cut = tok("<action>wa", add_special_tokens=False)["input_ids"]
    nxt = builder.extend(prompt, cut, "<action>wa", "obs", None, 9, last_valid=False)
    assert nxt.ids[len(prompt.ids) + len(cut)] == delta.end_of_turn
    assert "not a valid admissible action" in nxt.text


def test_engine_grows_one_chat_per_episode(tiny_model, tokenizer):
    engine = _engine(tiny_model, tokenizer, max_turns=4)
    result = engine.run([Task(seed=s, group=s) for s in (0, 1)])
    for traj in result.trajectories:
        assert traj.conversation and len(traj.turns) == 4 and traj.truncated
        _assert_extensions(traj)
        assert tokenizer.decode(traj.turns[-1].prompt_ids) == traj.turns[-1].prompt_text
        assert traj.turns[0].prompt_text.count("Admissible actions") == 1
        assert traj.turns[-1].prompt_text.count("Admissible actions") == 4  # list_admissible: every
        assert "[step 4] observation: obs 3" in traj.turns[-1].prompt_text
    assert result.prompt_tokens == sum(len(t.prompt_ids) for tr in result.trajectories for t in tr.turns)
    # every prompt after the first starts with the previous prompt + reply: a prefix cache's share
    assert result.reusable_prompt_tokens == sum(t.num_tokens for tr in result.trajectories for t in tr.turns[:-1])


def test_free_mode_and_admissible_list_only_in_the_first_message(tiny_model, tokenizer):
    engine = _engine(tiny_model, tokenizer, mode="free", max_turns=3, list_admissible="first")
    traj = engine.run([Task(seed=3, group=0)]).trajectories[0]
    _assert_extensions(traj)
    assert traj.turns[-1].prompt_text.count("Admissible actions") == 1


def test_context_limit_truncates_with_a_bootstrap_prompt(tiny_model, tokenizer):
    first = _engine(tiny_model, tokenizer, max_turns=3).run([Task(seed=0, group=0)]).trajectories[0]
    limit = len(first.turns[1].prompt_ids)  # the second prompt fits, the third does not
    traj = _engine(tiny_model, tokenizer, max_turns=10, max_prompt_tokens=limit).run([Task(seed=0, group=0)]).trajectories[0]
    assert len(traj.turns) == 2 and traj.truncated and not traj.terminated
    assert [t.truncated for t in traj.turns] == [False, True]
    assert len(traj.bootstrap_prompt_ids) > limit  # kept only to read V(s_T); nothing generated from it
    _assert_extensions(traj)


@pytest.mark.parametrize("mode", ["constrained", "free"])
def test_kept_kv_caches_prefill_only_new_tokens_and_change_nothing(tiny_model, tokenizer, mode):
    tasks = [Task(seed=s, group=s) for s in (0, 1, 2)]
    fresh = _engine(tiny_model, tokenizer, mode, max_turns=4).run(tasks)
    engine = _engine(tiny_model, tokenizer, mode, reuse=True, max_turns=4)
    kept = engine.run(tasks)
    assert engine.backend.prefix_store.entries == {}  # dropped at the end of the rollout
    assert fresh.prefilled_tokens == fresh.prompt_tokens
    for a, b in zip(fresh.trajectories, kept.trajectories, strict=True):
        assert len(a.turns) == len(b.turns)
        for ta, tb in zip(a.turns, b.turns, strict=True):
            assert ta.prompt_ids == tb.prompt_ids and ta.action_ids == tb.action_ids
            assert ta.rollout_logprobs == pytest.approx(tb.rollout_logprobs, abs=1e-4)
    # every turn after the first prefills only what follows the previous prompt + reply (its
    # last token was sampled, never fed, so it is prefilled with the new observation message)
    expected = sum(len(tr.turns[0].prompt_ids) + sum(len(t.prompt_ids) - p.num_tokens + 1
                                                     for p, t in zip(tr.turns, tr.turns[1:], strict=False))
                   for tr in kept.trajectories)
    assert kept.prefilled_tokens == expected < fresh.prefilled_tokens / 2


@pytest.mark.parametrize("algo", ["sapo", "grpo"])
def test_a_run_in_conversation_mode_logs_scored_unique_and_prefilled_tokens(tmp_path, algo):
    import agentrl

    overrides = [f"train.run_dir={tmp_path / algo}", "train.iterations=1", "train.save_every=0",
                 "train.eval_episodes=0", "train.samples_per_iteration=0", "rollout.tasks_per_iteration=2",
                 "rollout.history=conversation", "rollout.max_turns=3", "rollout.action_mode=constrained",
                 "rollout.backend=hf", *(["algorithm.group_size=2"] if algo == "grpo" else [])]
    cfg = agentrl.build_config(algo=algo, env="keydoor", model="tiny", overrides=overrides)
    record = agentrl.train(cfg).history[-1]
    assert record["tokens/scored"] == sum(v for k, v in record.items() if k.startswith("tokens/scored/"))
    assert record["tokens/scored/actor_update"] <= record["tokens/unique"] < record["tokens/scored"]
    assert 0 < record["tokens/prefilled"] < record["tokens/prompt"]  # kept KV caches
    with pytest.raises(UserError, match="rollout.history"):
        agentrl.build_config(algo=algo, env="keydoor", model="tiny", overrides=["rollout.history=chat"])


def test_conversation_demos_are_the_growing_chat_and_sft_reads_them(tmp_path, tokenizer):
    from agentrl.rollout.demos import read_demos, record_demos
    from agentrl.training.compose import conversation_builder, env_factory, prompt_builder
    from agentrl.training.config import EnvConfig
    from agentrl.training.sft import IGNORE, make_examples

    cfg = RolloutConfig(history="conversation")
    make = env_factory(EnvConfig(id="keydoor", kwargs={"n_rooms": 4}), "train")
    builder = prompt_builder(tokenizer, cfg, make())
    path = tmp_path / "demos.jsonl"
    stats = record_demos(make, builder, episodes=2, output=path, env_name="keydoor", split="train",
                         conversation=conversation_builder(builder, cfg))
    assert stats["expert_success"] == 1.0
    records = list(read_demos(path))
    eot_text = tokenizer.convert_ids_to_tokens(end_of_turn_id(tokenizer))
    for before, after in zip(records, records[1:], strict=False):
        if after["task_seed"] == before["task_seed"]:  # the same episode: the chat grows
            assert after["prompt"].startswith(before["prompt"] + before["reply"] + eot_text)
            assert len(after["messages"]) == len(before["messages"]) + 2
    for record, example in zip(records, make_examples(records, builder), strict=True):
        assert tokenizer.decode(example.prompt_ids) == record["prompt"]  # SFT renders the same chat
        assert example.labels[len(example.prompt_ids) - 1] == IGNORE


def test_sft_trains_a_conversation_episode_as_one_sequence_with_the_per_turn_gradient(
        tmp_path, tokenizer, tiny_model):
    """Conversation demos: one row per episode (every turn a span of it), and the loss and its
    gradient equal to training each turn as its own sequence; window demos stay per turn."""
    import random

    import torch

    from agentrl.models.policy import Policy
    from agentrl.rollout.demos import read_demos, record_demos
    from agentrl.training.compose import conversation_builder, env_factory, prompt_builder
    from agentrl.training.config import EnvConfig
    from agentrl.training.sft import batch_plan, make_examples, sft_loss, training_units, unit_loss

    make = env_factory(EnvConfig(id="keydoor", kwargs={"n_rooms": 4}), "train")
    units_of = {}
    for history in ("conversation", "window"):
        cfg = RolloutConfig(history=history, history_window=2)
        builder = prompt_builder(tokenizer, cfg, make())
        path = tmp_path / f"{history}.jsonl"
        record_demos(make, builder, episodes=3, output=path, env_name="keydoor", split="train",
                     noise=0.3, seed=1,
                     conversation=conversation_builder(builder, cfg) if history == "conversation" else None)
        records = list(read_demos(path))
        examples = make_examples(records, builder)  # expert turns only: noise turns are gaps
        units_of[history] = (examples, training_units(examples), records)
    examples, units, records = units_of["conversation"]
    assert any(not r["expert"] for r in records)  # a skipped noise turn inside an episode
    episodes = sorted({r["task_seed"] for r in records})
    assert len(units) == len(episodes) == 3
    assert sum(u.turns for u in units) == len(examples)
    for unit in units:  # each turn's prompt + reply sits at its place in the episode's sequence
        for span in unit.item.spans:
            assert list(unit.item.ids[span.prompt_length:span.end]) == list(span.action_ids)
    window_examples, window_units, _ = units_of["window"]
    assert len(window_units) == len(window_examples)  # window prompts are not prefixes of each other

    policy = Policy(tiny_model, tokenizer)
    total = float(sum(len(ex.reply_ids) for ex in examples))

    def loss_and_grad(fn, rows):
        tiny_model.zero_grad(set_to_none=True)
        loss = fn(policy, rows, total)
        loss.backward()
        return float(loss.detach()), torch.cat([p.grad.flatten() for p in tiny_model.parameters() if p.grad is not None])

    per_turn, grad_turn = loss_and_grad(sft_loss, examples)
    grouped, grad_grouped = loss_and_grad(unit_loss, units)
    assert grouped == pytest.approx(per_turn, rel=1e-5)
    assert torch.allclose(grad_grouped, grad_turn, rtol=1e-4, atol=1e-6)

    # batches: one-turn units cut every batch_turns shuffled turns (the per-turn plan); episodes
    # are gathered whole until a step holds batch_turns turns
    plan = batch_plan(window_units, 4, random.Random(0))
    order = list(range(len(window_units)))
    random.Random(0).shuffle(order)
    assert plan == [order[i:i + 4] for i in range(0, len(order), 4)]
    turns = [u.turns for u in units]
    plan = batch_plan(units, 2, random.Random(0))
    assert sorted(i for step in plan for i in step) == [0, 1, 2]
    assert all(sum(turns[i] for i in step) >= 2 or step == plan[-1] for step in plan)
