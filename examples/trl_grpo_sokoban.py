"""TRL's GRPOTrainer trains the tiny offline model on TurnSokoban-v0 through the env, turn by turn (CPU).

Run it (about half a minute; it prints the env turns each rollout played)::

    python examples/trl_grpo_sokoban.py --steps 4

What it does, in TRL's own terms (``GRPOTrainer(environment_factory=...)``, TRL >= 1.0):

1. builds the tiny model and tokenizer of ``reference_trainer.tiny`` (offline, cached) and gives
   the tokenizer a ChatML chat template that renders tools and tool calls in Qwen's format
   (``<tool_call>{"name": "move", "arguments": {...}}</tool_call>``), TRL's parser for that
   format (``trl.chat_template_utils.qwen3_template``) and tokens for the markup;
2. warm-starts the random model for a few supervised steps on expert games in that tool-call
   format, one call per turn, so that its samples call the ``move`` tool turn after turn (a random
   160k-parameter model never writes a well-formed tool call, and GRPO would see no env turn);
3. trains with ``GRPOTrainer`` for ``--steps`` optimizer steps: each dataset row names a level
   (``seed``), its ``num_generations`` rollouts play that level through
   :func:`agentgym_turn.integrations.trl.trl_environment`, and the env's episode return is the
   reward (``get_reward``), which TRL logs as ``rewards/TurnSokoban_v0Environment/mean``.

TRL's loop runs one more generation after each tool call, and only while the last answer holds a
parsable call, within ``max_tool_calling_iterations`` and ``max_completion_length`` (tool messages
included). The env is set so a game has many turns: one move a turn, levels of at least 5 moves.

``main()`` returns TRL's log history, every scored episode (seed, tool actions, rewards) and the
env turns of each rollout, so a test can replay the episodes in a fresh env, compare the returns
with what TRL logged, and check that the rollouts are multi-turn.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is marked experimental in TRL

import gymnasium as gym

import agentgym_turn  # noqa: F401  (registers the ids)
from agentgym_turn.integrations.trl import EpisodeRecord, trl_environment

ENV_ID = "TurnSokoban-v0"
#: TurnSokoban-v0's 6x6 one-box levels and 10-move episodes, played one move a turn over up to 10
#: turns (the registered 5 moves a turn solve most levels in one or two calls, and the 10-move cap
#: allows at most 2 full turns), on levels whose shortest solution has at least 5 moves, so every
#: level takes at least 5 turns. Compact messages without the all-wall border (16 grid tokens, not
#: 36), so a 10-turn game fits in the tiny model's 1,024 positions.
ENV_KWARGS = {
    "prompt_style": "compact",
    "show_border": False,
    "max_actions_per_turn": 1,
    "min_moves": 5,
    "max_episode_steps": 10,
}
TURN_LIMIT = ENV_KWARGS["max_episode_steps"]  # TRL's max_tool_calling_iterations: one env turn each
#: The tool-call markup as tokens of its own (chat models' vocabularies have ``<tool_call>`` and
#: ``</tool_call>`` tokens too). The tiny BPE, trained on Sokoban text only, would spell the JSON
#: one character at a time: 65 tokens a call instead of 11, where one wrong token
#: in any call of a sampled game ends the game (TRL's parser finds no call). With these pieces each
#: token of the markup follows from the one before it, which a 2-layer model learns in a few steps.
TOOL_CALL_TOKENS = ["<tool_call>", "</tool_call>", '{"name": "', '", "arguments": {"', '": "', '"}}', "moves"]
#: Tokens of a whole rollout after the prompt (TRL's ``max_completion_length`` counts the tool
#: messages too): a turn is about 60 tokens (an 11-token ``move`` call, then the tool message with
#: its grid), so 10 turns and the final answer take about 610; the prompt is about 145 of the
#: 1,024 positions. TRL drops a tool message that would not fit and ends the rollout there.
COMPLETION_TOKENS = 640
SYSTEM = "Push the box X onto the target O."
#: ChatML (the tiny template) plus tools, in Qwen's tool-call format but with a one-line tool list:
#: Qwen2.5's own template spends ~700 tiny-BPE tokens on the JSON schema, most of the 1,024 positions.
TOOL_CHAT_TEMPLATE = (
    "{%- if messages[0].role == 'system' or tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content }}{%- endif %}"
    "{%- if tools %}{{- '\\nTools:' }}{%- for tool in tools %}"
    "{{- ' ' + tool.function.name + '(' + (tool.function.parameters.properties | list | join(', ')) + ')' }}{%- endfor %}"
    '{{- \'. Call one as <tool_call>{"name": ..., "arguments": {...}}</tool_call>\' }}{%- endif %}'
    "{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' %}{{- '<|im_start|>assistant\\n' + (message.content or '') }}"
    "{%- for call in message.tool_calls or [] %}"
    "{{- '<tool_call>' + ({'name': call.function.name, 'arguments': call.function.arguments} | tojson) + '</tool_call>' }}"
    "{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- elif message.role != 'system' %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def expert_conversation(seed: int, environment: type) -> list[dict[str, Any]]:
    """An expert game as chat messages with tool calls: what the warm-start imitates."""
    env = gym.make(ENV_ID, **ENV_KWARGS)
    observation, _ = env.reset(seed=seed)
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": observation}]
    done = False
    while not done:
        moves = env.unwrapped.expert_action().removeprefix("<answer>").removesuffix("</answer>")
        call = {"type": "function", "function": {"name": "move", "arguments": {"moves": moves}}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        observation, _, terminated, truncated, _ = env.step(f"<answer>{moves}</answer>")
        done = terminated or truncated
        messages.append(
            {"role": "tool", "name": "move", "content": observation + ("\n(The episode is over.)" if done else "")}
        )
    messages.append({"role": "assistant", "content": "Done."})
    return messages


def warm_start(model: Any, tokenizer: Any, environment: type, *, steps: int, seed: int, lr: float = 1e-2) -> float:
    """Supervised steps on expert tool-call games (loss on assistant tokens only); returns the last loss."""
    import torch

    tools = [environment.move]
    examples = []
    for level in range(32):
        messages = expert_conversation(10_000 + level, environment)
        ids: list[int] = []
        labels: list[int] = []
        for k, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            before = tokenizer.apply_chat_template(
                messages[:k], tools=tools, add_generation_prompt=True, tokenize=False
            )
            upto = tokenizer.apply_chat_template(messages[: k + 1], tools=tools, tokenize=False)
            assert upto.startswith(before)
            head = tokenizer(before[len(tokenizer.decode(ids)) :] if ids else before, add_special_tokens=False)[
                "input_ids"
            ]
            answer = tokenizer(upto[len(before) :], add_special_tokens=False)["input_ids"]
            ids += head + answer
            labels += [-100] * len(head) + answer
        examples.append((ids, labels))
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    loss_value = float("nan")
    for step in range(steps):
        batch = [examples[(step * 4 + j) % len(examples)] for j in range(4)]
        width = max(len(ids) for ids, _ in batch)
        pad = tokenizer.pad_token_id
        input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in batch])
        labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in batch])
        attention = (torch.arange(width)[None, :] < torch.tensor([len(ids) for ids, _ in batch])[:, None]).long()
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_value = float(loss.detach())
    return loss_value


def main(steps: int = 4, *, warm_start_steps: int = 60, output_dir: str | None = None, seed: int = 0) -> dict[str, Any]:
    """Warm-start, then ``steps`` GRPO optimizer steps; returns the log history, the scored episodes and their turns."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_template

    from reference_trainer.tiny import build_tiny

    torch.set_num_threads(1)  # a 160k-parameter model: more threads only contend on a busy machine
    path = build_tiny(ENV_ID, env_kwargs=ENV_KWARGS, seed=seed)
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.chat_template = TOOL_CHAT_TEMPLATE
    tokenizer.response_template = qwen3_template  # TRL's parser of <tool_call>{json}</tool_call> in ChatML answers
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    tokenizer.add_tokens(TOOL_CALL_TOKENS)
    torch.manual_seed(seed)  # the new embedding rows are drawn like the others, from the model's initializer
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)

    environment = trl_environment(ENV_ID, **ENV_KWARGS)
    environment.history = []  # every scored rollout, in the order TRL scores them
    warm_loss = warm_start(model, tokenizer, environment, steps=warm_start_steps, seed=seed)

    num_generations, tasks_per_step = 4, 2
    rows = steps * tasks_per_step
    dataset = Dataset.from_dict(
        {
            "prompt": [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": ""}]] * rows,
            "seed": list(range(seed, seed + rows)),  # one level per row; its num_generations rollouts share it
        }
    )
    with tempfile.TemporaryDirectory() as scratch:
        config = GRPOConfig(
            output_dir=output_dir or scratch,
            max_steps=steps,
            per_device_train_batch_size=num_generations * tasks_per_step,
            num_generations=num_generations,
            max_completion_length=COMPLETION_TOKENS,  # room for the whole game, tool messages included
            max_tool_calling_iterations=TURN_LIMIT,  # one env turn per iteration, up to the env's turn limit
            learning_rate=3e-4,  # small steps: the warm-started tool-call format must survive GRPO's first updates
            temperature=1.0,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            use_cpu=True,
            bf16=False,
            seed=seed,
            shuffle_dataset=False,
            dataloader_num_workers=0,
            gradient_checkpointing=False,  # a 160k-parameter model needs no activation memory savings
        )
        trainer = GRPOTrainer(
            model=model,
            args=config,
            train_dataset=dataset,
            processing_class=tokenizer,
            environment_factory=environment,
        )
        trainer.train()
    episodes: list[EpisodeRecord] = list(environment.history)
    return {
        "log_history": trainer.state.log_history,
        "episodes": episodes,
        "turns": [len(episode.actions) for episode in episodes],  # env.step calls per scored rollout
        "rollouts_per_step": num_generations * tasks_per_step,
        "reward_key": f"rewards/{environment.__name__}/mean",
        "warm_start_loss": warm_loss,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=4, help="GRPO optimizer steps")
    parser.add_argument("--warm-start-steps", type=int, default=60, help="supervised steps on expert games first")
    args = parser.parse_args()
    result = main(args.steps, warm_start_steps=args.warm_start_steps)
    for entry in result["log_history"]:
        if result["reward_key"] in entry:
            print(
                json.dumps(
                    {"step": entry["step"], "reward": entry["reward"], "tool_calls": entry.get("tools/call_frequency")}
                )
            )
    turns = result["turns"]
    print(
        json.dumps(
            {
                "rollouts": len(turns),
                "mean_turns_per_rollout": round(sum(turns) / max(len(turns), 1), 3),
                "turns_per_rollout": turns,
            }
        )
    )
