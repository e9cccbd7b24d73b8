"""The tiny model's recipe on TurnSearchQA-v0: Turn-PPO learns when to search.

What RL can and cannot teach this model, measured (the history is below): the 2-layer model
copies a year or a short name out of a passage it has been shown, but learns *which* span answers
a question only slowly, from expert answers (+0.6 points per 100 SFT steps) and not measurably from
its own sampled ones (every run of the earlier drafts below: within about a point). What RL does
teach it, fast, is a decision it can already execute both ways: search, or answer at once. That is
Search-R1's own claim (RL teaches a model to call the search engine rather than answer from what
it knows), and this recipe measures it.

* **The demonstrator** answers three single-hop relations from memory: questions on a person's
  birth year, an organisation's founding year and its headquarters are answered at once, without
  a search, in 70% of cases (``expert_recall``, ``expert_recall_rate=0.7``, options of the env; which
  questions is fixed per question). On the training world (0) those answers are right, since the
  demonstrator knows that world's facts; on a fresh world they are a habit that fails.
  Everything else it searches like the oracle. At 70% the habit is a tendency: the imitating policy
  answers those questions at once when greedy, and searches them now and then when sampled, so RL
  sees both outcomes.
* **Held-out**: the single-hop questions of world 101 (640 of them, greedy): new names, facts and
  questions, nothing learnt by heart answers them. Single-hop only, because the 2-layer model
  answers 2% of the bridge questions and 11% of the comparison ones (the 21.6% start below), too
  little to learn from. RL plays the training world's single-hop questions
  (``question_types=["single_hop"]``).
* **Model**: the copy-pretrained tiny Qwen2 of the draft (2,048-token tokenizer and 300 steps of
  next-token loss on whole episodes of 16 other generated worlds, played by the searching expert:
  ``SEARCHQA_PRETRAIN["env_kwargs"]`` turns the recall off there), then **SFT**: 1,200 steps of 16 of
  4,000 demonstrations of every question type (``sft_env_kwargs``: bridge and comparison episodes
  hold more copies, and the copying is what the single-hop questions need), lr 1e-3.
* **RL**: Turn-PPO, 20 iterations of 128 episodes, minibatches of 16 (8 optimizer steps an
  iteration), lr 3e-4, the Sokoban recipe's noise control (separate critic, KL to the weight average,
  which evaluations play), temperature 0.8, format penalty -0.1 per invalid turn.

**Measured** (seed 0 start; one thread per run, two runs at a time on a 2-core machine):

* The SFT start: **24.7%** held-out exact match (loss 0.184; 9% invalid turns). By template: birth
  year, founding year and headquarters 0% (answered from memory), death year 61%, work year 64%,
  creator 37%, birthplace 36%, city's country 24%, employer, founder and publisher 0-3% (names the
  model garbles).
* Turn-PPO from it, seeds 0 / 1 (40-iteration runs, evaluated every 10): 38.4% / 38.9% at iteration
  10, 38.0% / 41.1% at 20, 40.3% / 42.2% at 30; the held-out episodes grow from 2.03 to 2.32 turns
  (the policy searches the recalled relations).
* **The benchmark** (``benchmarks/learning.py --env searchqa --eval-every 10``, the recipe's 20
  iterations, seeds 0 / 1 / 2 from the one start): **+13.3 ± 2.9, +16.4 ± 3.2, +14.5 ± 3.1** points
  (paired 95% intervals; 24.7% -> 39.4%, mean of seeds), 97-116 s of RL each; clip fractions 0.002
  of tokens and of turns. With 30 iterations (the first budget; the same runs continued):
  **+15.6 ± 3.0, +17.5 ± 3.2, +15.5 ± 3.2** (40.9%), 197 s of RL each; the suite's three learning
  jobs did not fit its time with them. Seed 0's policy after 30 by relation (start -> end): birth year 0 -> 62%,
  founding year 0 -> 81%, headquarters 0 -> 10% (a city's name, copied worse than a year),
  birthplace 36 -> 51%, the others within a few points.
* Why 70%: with the habit a rule (``expert_recall_rate=1``, the same three relations, 1,200 SFT
  steps) the start is 19.4%, below the 20-60% band RL was asked to start from (the habit spread
  to birthplaces and countries, 0-1%). With two relations only (founding year, headquarters; rate 1)
  the start is 27.7%, but sampling never tries a search on them: Turn-PPO gave +2.3 (+0.5 to +4.2)
  and +3.7 (+1.7 to +5.8) points in 40 iterations on seeds 0 and 1, the episodes' length flat. At
  rate 0.5 the start is 31.1%, the greedy policy already searching most birth years (65%): less to
  unlearn. The recall in the pretraining too (rate 1, 1,200 SFT steps) gave a 12.5% start.
* The first try, before the recall option existed as a recipe: the draft's 21.6% start (all types)
  fine-tuned 200 steps on single-hop questions with the three relations recalled (rate 1): 22.3%;
  Turn-PPO, minibatches of 16, lr 3e-4: +6.6 at 20 iterations, **+17.0 (+13.8 to +20.3)** at 40
  (rollout success 0.28 -> 0.43-0.53). With minibatches of 64 (2 optimizer steps an iteration)
  +1.25 at 20; at lr 6e-4, +15.2 at 40 with gradient-norm spikes (up to 950).

The earlier drafts, all types held out, in the order they were tried:

What each choice does, and what it gave (seed 0, CPU seconds of one thread on a busy machine):

* **Held-out evaluation**: questions of a world generated with ``world_seed=101``
  (:data:`SEARCHQA_EVAL_ENV_KWARGS`; training uses world 0), ``split="all"``: new names, facts
  and questions, so nothing learnt by heart answers them; 640 questions greedy, enough for a
  paired interval of +-4 points when up to 25% of the questions change outcome
  (``stats.required_tasks(0.25, 0.04) == 601``).
* **Compact env** (opt-in options of the env, defaults unchanged): a one-line prompt
  (:data:`SEARCHQA_PROMPT`, with the example answer pair Search-R1's scorer needs), one passage
  per search (``topk=1``) cut to its first 3 sentences (``passage_sentences=3``: the lead facts,
  no fillers), two searches, and an expert without its ``<think>`` line
  (``expert_think=False``). The expert still answers 79% of questions (it answers "unknown"
  when one passage per search does not surface the evidence); an expert episode is about 230
  tokens instead of 430 with the think lines, 980 characters of text in the default style.
* **Format penalty** -0.5 per invalid turn (Search-R1's reward has none; a tiny model needs one
  to keep the tags).
* **Why a plain tiny model fails** (the earlier drafts, on a 512-token BPE of one world; held-out
  EM after SFT / final SFT loss per response token / SFT CPU seconds): GPT-2 tiny, 200 steps x
  32 episodes, lr 3e-3: 0.0% / 1.88 / 109 s; Qwen2 tiny, 400 x 16: 0.7% / 1.58 / 163 s; Qwen2
  with ``rope_theta=1000``, 800 x 8, lr 5e-3: 0.0% / 1.43 / 184 s; 2,500 steps (~570 s): loss
  0.61, EM 0.0-0.5%; 8,000 distinct demonstrations: loss 1.32, EM 0.0%. The model learns the
  tags, never to copy an unseen coined name (12.5 tokens) into its query or the answer out of
  the passage. Copying needs an induction circuit (a previous-token head feeding a head that
  attends to "the token after the earlier copy of this one"); on repeated coined names a fresh
  tiny model stays on the plateau before that circuit forms (copy accuracy 20% after 400 steps
  at lr 3e-3 or 1e-2, with ``rope_theta`` 1000 or 10^6): far past a CPU budget.
* **Copy pretraining** (:mod:`reference_trainer.pretrain`, ``tiny_pretrain`` =
  :data:`SEARCHQA_PRETRAIN`): (1) the tokenizer (2,048 tokens) is trained on the text of 16
  generated worlds (seeds 1000-1015, never 0 or 101): a held-out name is 7.0 tokens instead of
  12.5 (512 tokens, one world: 12.5; 1,024 tokens, 16 worlds: 8.5); (2) two heads per layer are
  set to a previous-token / induction circuit (``rope_theta=10**6`` leaves four rotary pairs
  nearly still for matching by content): it copies 60% of a repeated coined-name sequence
  before any training, 87% after 100 steps; (3) 300 steps x 16 whole expert episodes of those
  worlds (2,048 episodes), next-token loss on every token, response tokens weighted 4: names
  change with every world, so only copying lowers the loss (final loss 1.01 nats per token).
* **SFT** on world 0 after that, 16 episodes a step at lr 1e-3, held-out EM on 200 questions of
  world 101 (seed 0; CPU seconds on a 2-core machine shared with 2 other jobs, about twice a quiet
  thread's): 100 steps 5.0% (300 plain pretraining steps instead of response-weighted: 7-8% at
  200 steps), 300 steps 11.5% (SFT 153 s; 15% invalid turns), 600 steps 19.5% (SFT 290 s at load 6,
  about 0.2 s a step on a quieter machine; 11% invalid turns; final loss 0.18). Twice the
  pretraining (600 steps, final loss 0.78, 608 s at load 6) gives 15.0% before any SFT (3.0% after
  300) but the same 19.5% after the 600 SFT steps: the SFT start plateaus near 20%. The
  pretraining took 312 s of training and 87 s of data there (59 s of training for 150 steps at a
  quieter moment). Failures seen: the first token of a copied name (``Fkaill`` for
  ``Skekaill``), a second search repeating the first, and bridge and comparison questions (half
  of the held-out set; the expert itself answers 62% of them with one passage per search).
* **Depth** (the Sokoban recipe learned only with a third layer): ``tiny_layers=3`` with the same
  copy pretraining (its own: 836 s at load 2-3) and the same 600 SFT steps (304 s) ends SFT at loss
  0.237 (2 layers: 0.178) and **5.8%** held-out EM on the 640 questions (2 layers: 18.1%), 12.4% invalid
  turns: below the band RL should start from, so no RL from it. At this pretraining budget the third
  layer costs more than it brings.
* **Where the 2-layer start fails** (greedy, the 640 held-out questions, 18.1% right): by type,
  single-hop 32.9% (319 questions), comparison 9.2% (119), bridge **0.0%** (202). Not the format
  (434 of the 524 failures play no invalid turn) and rarely the first search, which copies the
  question's name correctly, but what comes after it: 195 of the 521 wrong answers are a span of a
  passage shown (the wrong fact of the right passage: the headquarters city for "who founded"),
  the rest "unknown", a garbled copy (``1020`` for 2020) or a name from no passage; bridge questions
  search a wrong or garbled entity for their second hop. Sampling 8 rollouts (temperature 0.8) of
  each of 32 training questions: 21 questions never succeed, 2 always, 9 have mixed outcomes; only
  1.6% of the sampled answers have a token F1 strictly between 0 and 1, so F1 partial credit would
  reward almost nothing that exact match does not (not tried for that reason).
* **RL** (Turn-PPO, as Sokoban's: separate critic, weight average with a KL anchor to it,
  temperature 0.8). From the earlier 0% starts every rollout scored 0: no signal. From the
  copy-pretrained start (the 600-step SFT above; 18.1% on the full 640 held-out questions, 12.8%
  invalid turns), seed 0, 15 iterations of 128 episodes at lr 3e-4: rollout success 12-24% with
  no trend, held-out EM 18.1% -> 18.75% (+0.6 points, paired 95% interval -0.4 to +1.7;
  invalid turns 12.8% -> 8.0%), RL 248 s at load 6 (about 17 s an iteration). At lr 1e-3: 18.1% -> 17.8% (-0.3, interval -1.5
  to +0.9; invalid turns 12.8% -> 4.5%): RL learns the format, not yet the copying. Three times
  as long (45 iterations at lr 3e-4, 394 s of RL on a quiet thread): 18.1% -> 19.4% (+1.25,
  interval -0.4 to +2.9; invalid turns 12.8% -> 4.2%), rollout success still flat at 13-27%:
  more iterations alone do not bring the +10. The next step to try: a longer pretraining or a
  wider model (the first token of a copied name is its commonest error; the greedy count below,
  on all 640 questions, finds the wrong span and "unknown" commoner).
* **What RL optimises here** (same start, seed 0, rollout success per iteration of 128 episodes;
  a machine shared with two other jobs). GRPO (16 questions x 8, 15 iterations, 79 s of RL): held-out
  EM 18.1% -> 17.8% (-0.3, interval -1.2 to +0.6). Turn-PPO at lr 1e-3 with ``kl_coef=0.02`` (a
  faster-moving policy): rollout success fell from 0.16-0.23 to 0.04-0.16 over 78 iterations
  (stopped) while invalid turns fell from 7.6% to about 2% and turns per episode from 2.8 to
  2.3-2.7: with a -0.5 penalty per invalid turn, the policy learns to risk fewer turns, so it
  searches less and answers worse. Without the penalty (``format_penalty=0``, Search-R1's
  reward: exact match only), invalid turns rose from 8% to 67% within 14 iterations (stopped)
  and success did not rise. Exact match gives the tiny model too rare a signal for its copying;
  the penalty's signal is dense, so RL follows the penalty.
* **A smaller penalty and more steps** (same start, seed 0, 640 held-out questions, a
  2-core machine at load 3-4.5). ``format_penalty=-0.1`` (the strict parser's default) with
  ``minibatch_size=16`` (8 optimizer steps an iteration instead of 2), lr 3e-4, 20 iterations:
  held-out EM 18.1% -> 18.3% (iteration 10) -> 18.4% (+0.3, interval -1.4 to +2.0; invalid turns
  12.8% -> 10.1%), rollout success 0.16-0.26 with no trend; per-iteration approx KL 0.001-0.005,
  KL to the average 0.03-0.14, turn clip fraction under 2%, the critic's explained variance rising
  0 -> 0.25; 287 s of RL. The policy moves; its moves do not raise success.
  Faster and more exploratory (lr 1e-3, rollout temperature 1.0, otherwise the same): rollout
  success falls to 0.08-0.17 (temperature 1.0 samples worse answers), per-token entropy climbs
  0.47 -> 0.65-0.78, approx KL 0.02 an iteration, turn clip fraction 2-5%; held-out 18.1% -> 17.3%
  (iteration 10) -> 18.75% (+0.6, interval -0.9 to +2.2), 277 s of RL.
* **More SFT** (600 further steps from that start at lr 1e-3 on 2,000 fresh expert episodes, 298 s
  at load 4-5): loss 0.178 -> 0.148, held-out EM 18.1% -> **21.6%** (12.0% invalid turns): SFT still
  rises, slowly (+3.5 points for 5 CPU minutes), and the start enters the 20-60% band. 600 steps more
  (again fresh expert episodes, 176 s at load ~2): loss 0.097, held-out 22.8% (+1.2; 13.5% invalid
  turns): the SFT curve flattens near 23% while its loss keeps falling.
* **A single-hop curriculum** (the env's opt-in ``question_types=["single_hop"]`` for the rollouts,
  evaluation unchanged: every type of world 101; from the 21.6% start, ``format_penalty=-0.1``,
  minibatches of 16, lr 3e-4, 20 iterations, 250 s of RL): the signal RL lacked is there (rollout
  success 0.36-0.50, so most questions have mixed outcomes; the critic's explained variance 0.2-0.5;
  turn clip fraction under 1%, approx KL 0.003 an iteration), yet rollout success has no trend and
  held-out EM goes 21.6% -> 21.6% (iteration 10) -> 21.7% (+0.2, interval -1.2 to +1.6).
  The 21.6% start by type: single-hop 37.9%, comparison 10.9%, bridge 2.0%; 134 of its 502 wrong
  answers are "unknown" (106 of them on bridge and comparison questions: the expert's answer when
  one passage per search misses the evidence, imitated), 150 a span of a passage shown; 8 samples of
  each of 32 training questions: 16 never right, 2 always, 14 mixed. The same curriculum with lr 1e-3
  and ``epochs=2`` (4x the movement per iteration) collapses: approx KL 0.16-0.47 an iteration, turn
  clip fraction 15-27%, the KL estimate to the average and the gradient norm blow up (up to 10^5 and
  10^6 in the first iterations), invalid turns 3% -> 68% -> 12%, rollout success 0.45 -> 0.07 -> 0.17;
  held-out 21.6% -> 18.75% -> 19.1% (-2.5, interval -4.5 to -0.5), 498 s of RL.
  Three times as long (the lr 3e-4 curriculum, 60 iterations, 424 s of RL at load 2-3): rollout
  success 0.45 over the first 10 iterations, 0.47 over the last 10; held-out 21.6% -> 21.7% (20) ->
  20.6% (40) -> 21.7% (60) (+0.2, interval -1.5 to +1.8); invalid turns 12.0% -> 7.4%. Iterations 1-20
  repeat the 20-iteration run exactly (same seed, same numbers).
  Without the noise control (``kl_coef=0``, ``ema_decay=0``: the paper's plain Turn-PPO, the current
  weights evaluated; 20 iterations, 148 s of RL at load ~2): rollout success 0.38-0.48, no trend;
  held-out 21.6% -> 20.3% -> 19.5% (-2.0, interval -3.7 to -0.3): the anchor and the average are not
  what holds the gain back; without them the noise costs points, as on Sokoban.
  GRPO on the same curriculum (16 questions x 8 an iteration, 20 iterations, 107 s of RL): rollout
  success 0.24-0.65 with no trend, turn clip fraction 5-8%; held-out 21.6% -> 20.8% -> 21.1% (-0.5,
  interval -1.9 to +0.9).
* **What would be needed** (not tried for lack of time): a start that learns which span answers
  faster than this one (SFT gains ~0.6 points per 100 steps from 18%, ~0.2 from 21.6%), so that RL's few right answers
  are worth more than SFT's: e.g. copy pretraining whose episodes ask for one fact of a passage with
  several (the relation, not only the copy), or a bigger model with a longer pretraining (3 layers at
  the same budget start at 5.8%; d=128 and longer budgets untested). The search-QA learning job would
  also have to fit the suite: the 21.6% start alone took about 16 CPU minutes here (pretraining
  ~400 s, 1,200 SFT steps ~590 s, at load 4-6), against ~5 for one learning job.
"""

from __future__ import annotations

from typing import Any

from ..config import Config, preset
from .base import NOISE_CONTROL, Recipe

__all__ = ["RECIPE", "SEARCHQA_ENV", "SEARCHQA_ENV_KWARGS", "SEARCHQA_EVAL_ENV_KWARGS", "SEARCHQA_EVAL_WORLD", "SEARCHQA_PRETRAIN",
           "SEARCHQA_PROMPT", "SEARCHQA_RECALL", "SEARCHQA_RL_ITERATIONS", "SEARCHQA_SFT_ENV_KWARGS", "searchqa_tiny"]

SEARCHQA_ENV = "TurnSearchQA-v0"
#: The first message: the two actions and the question (Search-R1's scorer skips the prompt's example answer pair).
SEARCHQA_PROMPT = "Search: <search> name </search>. Answer: <answer> x </answer>.\nQuestion: {question}\n"
#: The single-hop templates the demonstrator answers from memory (``expert_recall``, 70% of their questions, fixed per
#: question): right on the training world, a habit RL must unlearn on any other.
SEARCHQA_RECALL: list[str] = ["birth_year", "founded", "headquarters"]
SEARCHQA_ENV_KWARGS: dict[str, Any] = {"prompt_template": SEARCHQA_PROMPT, "topk": 1, "max_searches": 2, "passage_sentences": 3,
                                       "expert_think": False, "format_penalty": -0.1, "question_types": ["single_hop"],
                                       "expert_recall": SEARCHQA_RECALL, "expert_recall_rate": 0.7}
#: Expert play (SFT, the tokenizer's corpus, the pretraining) covers every question type: bridge and comparison
#: episodes copy more names per episode, so the copying the single-hop questions need is learnt faster.
SEARCHQA_SFT_ENV_KWARGS: dict[str, Any] = {"question_types": None}
#: The world of the held-out questions: a seed the training world (0) is not.
SEARCHQA_EVAL_WORLD = 101
#: Held-out: the single-hop questions of world 101, every split (``question_types`` carries over from the env's options).
SEARCHQA_EVAL_ENV_KWARGS: dict[str, Any] = {"world_seed": SEARCHQA_EVAL_WORLD, "split": "all"}
#: Copy pretraining (:class:`reference_trainer.pretrain.PretrainSpec`): a seeded induction circuit, then next-token
#: loss on whole expert episodes of 16 generated worlds that are neither the training world (0) nor the held-out one,
#: played by the searching expert (no recall: the pretraining teaches copying, SFT the demonstrator's habits).
SEARCHQA_PRETRAIN: dict[str, Any] = {"worlds": list(range(1000, 1016)), "world_scale": 0.25, "episodes_per_world": 128, "steps": 300,
                                     "batch_size": 16, "lr": 3e-3, "response_weight": 4.0, "induction_heads": 2,
                                     "env_kwargs": {"expert_recall": []}}
#: RL budget in iterations of 128 episodes (30 in the first measurements below; 20 keep the suite's three learning
#: jobs inside its time: the gain is made by iteration 10 and barely grows after).
SEARCHQA_RL_ITERATIONS = 20


def searchqa_tiny(algo: str = "turn-ppo", *, seed: int = 0, iterations: int = SEARCHQA_RL_ITERATIONS, out: str = "runs/searchqa",
                  model: str = "tiny", sft_episodes: int = 4000, **train: Any) -> Config:
    """The configuration of one run: SFT warm start (unless ``sft_episodes=0``), then ``algo``.

    ``model`` is ``"tiny"`` (built offline) or a checkpoint directory, e.g. a saved SFT policy
    to start RL from; ``train`` overrides fields of any config section.
    """
    rollout: dict[str, Any] = dict(tasks_per_iteration=128, num_envs=128, max_new_tokens=24, temperature=0.8,
                                   max_context_tokens=512, env_kwargs=dict(SEARCHQA_ENV_KWARGS))
    if algo == "grpo":
        rollout.update(tasks_per_iteration=16, group_size=8)  # the same 128 episodes, 8 per question
    return preset(algo, **{
        "model": model, "tiny_arch": "qwen2", "tiny_rope_theta": 1e6, "tiny_vocab": 2048, "tiny_pretrain": dict(SEARCHQA_PRETRAIN),
        **rollout,
        "lr": 3e-4, "lr_warmup_steps": 10, "minibatch_size": 16, "micro_batch_tokens": 4096,
        **NOISE_CONTROL,
        "env": SEARCHQA_ENV, "iterations": iterations, "seed": seed, "eval_every": 0, "eval_episodes": 640,
        "eval_env_kwargs": dict(SEARCHQA_EVAL_ENV_KWARGS),
        "sft_episodes": sft_episodes, "sft_steps": 1200, "sft_batch_size": 16, "sft_lr": 1e-3,
        "sft_env_kwargs": dict(SEARCHQA_SFT_ENV_KWARGS), "out": out,
        **train,
    })


#: The recipe (registered in :data:`reference_trainer.recipes.RECIPES`).
RECIPE = Recipe(name="searchqa", env_id=SEARCHQA_ENV, build=searchqa_tiny, rl_iterations=SEARCHQA_RL_ITERATIONS, metric="success",
                what=f"held-out greedy exact match on 640 single-hop questions of a fresh world (world_seed={SEARCHQA_EVAL_WORLD})", sft_minutes=7, rl_minutes=2.8)
