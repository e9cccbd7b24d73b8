"""TurnSearchQA: multi-turn search-then-answer in Search-R1's protocol, fully offline."""

from __future__ import annotations

import re
import zlib
from typing import Any, Sequence

from ..core import InvalidAction, TagMatch, TurnEnv, TurnOutcome, find_tagged, snippet
from ..core.args import is_int, is_number
from ..core.splits import content_key
from ..core.turn_env import DEFAULT_MAX_ACTION_LENGTH, DEFAULT_MAX_OBSERVATION_LENGTH
from .reward import LETTERS, choice_index, exact_match, token_f1
from .protocol import INVALID_MESSAGE, cut_response, extract_answer, first_action, information_block
from .expert import oracle_response
from .generator.questions import TEMPLATES, Question
from .retrieval import HTTPRetriever, Retriever
from .corpus import first_sentences
from .source import QUESTION_KEYWORDS, QuestionSource, local_retriever, question_source

#: ``protocol=`` values: Search-R1's pipeline as it runs (default), or our stricter parser.
PROTOCOLS = ("search_r1", "strict")

#: Longest search query accepted, in characters (a longer one is an invalid turn).
MAX_QUERY_CHARS = 2_000

#: First user message of an open question. ``{question}``, ``{topk}`` and ``{max_searches}`` are filled in.
DEFAULT_PROMPT = (
    "Answer the question below. Reason inside <think> and </think> whenever you receive new "
    "information. If some knowledge is missing, search for it by writing <search> your query "
    "</search>: the top {topk} passages come back between <information> and </information>. You "
    "may search up to {max_searches} times. When you know the answer, give it inside <answer> and "
    "</answer> with no explanation, for example <answer> Paris </answer>.\n"
    "Question: {question}\n"
)
#: First user message of a multiple-choice question; ``{options}`` holds the ``A. ...`` lines.
DEFAULT_MCQ_PROMPT = (
    "Answer the multiple-choice question below. Reason inside <think> and </think> whenever you "
    "receive new information. If some knowledge is missing, search for it by writing <search> "
    "your query </search>: the top {topk} passages come back between <information> and "
    "</information>. You may search up to {max_searches} times. When you know the answer, give "
    "the letter of the correct option inside <answer> and </answer>, for example <answer> B "
    "</answer>.\n"
    "Question: {question}\n"
    "Options:\n{options}\n"
)
_HOW = (
    "If I want to search, I should put the query between <search> and </search>. "
    "If I want to give the final answer, I should put the answer between <answer> and </answer>. "
    "Let me try again."
)


_PLACEHOLDER = re.compile(r"\{(question|topk|max_searches|options)\}")


def _fill(template: str, **fields: Any) -> str:
    """Fill the template's placeholders in one pass: the question's own text is never scanned for braces."""
    return _PLACEHOLDER.sub(lambda m: str(fields[m.group(1)]) if m.group(1) in fields else m.group(0), template)


def check_settings(
    *,
    protocol: str,
    topk: Any,
    max_searches: Any,
    passage_sentences: Any,
    prompt_template: Any,
    expert_recall: Any,
    expert_recall_rate: Any,
) -> None:
    """Raise a ValueError naming the first of ``TurnSearchQAEnv``'s settings that is out of its range."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {list(PROTOCOLS)}, got {protocol!r}.")
    if not is_int(topk, 1):
        raise ValueError(f"topk must be a positive integer, got {topk!r}.")
    if not is_int(max_searches, 0):
        raise ValueError(f"max_searches must be a non-negative integer, got {max_searches!r}.")
    if passage_sentences is not None and not is_int(passage_sentences, 1):
        raise ValueError(
            f"passage_sentences must be None (whole passages) or a positive integer, got {passage_sentences!r}."
        )
    if prompt_template is not None:
        if not isinstance(prompt_template, str) or "{question}" not in prompt_template:
            raise ValueError("prompt_template must be a string containing '{question}'.")
        if protocol == "search_r1" and extract_answer(prompt_template + "<answer>x</answer>") is None:
            raise ValueError(
                "prompt_template needs an example answer such as '<answer> Paris </answer>' with "
                "protocol='search_r1': Search-R1's scorer skips the first <answer> pair of the "
                "sequence (the prompt's example), so without one every answer would score 0."
            )
    recall = (expert_recall,) if isinstance(expert_recall, str) else tuple(expert_recall)
    known = [name for _, name, _ in TEMPLATES]
    if not set(recall) <= set(known):
        raise ValueError(f"expert_recall must name question templates among {known}, got {list(expert_recall)!r}.")
    if not is_number(expert_recall_rate) or not 0 <= expert_recall_rate <= 1:
        raise ValueError(f"expert_recall_rate must be a number in [0, 1], got {expert_recall_rate!r}.")


class TurnSearchQAEnv(TurnEnv):
    """Answer a question by searching a corpus, in Search-R1's turn protocol.

    ## Description

    Each episode asks one question. The agent may search a corpus with a free-text query, read
    the top passages, search again, and finally answer. Questions come from a generated world
    of fictional people, cities, countries, organisations and works (default), whose names are
    coined words, so nothing can be answered from memory: single-hop questions ("In which city
    was X born?"), two-hop bridge questions ("In which city was the author of the novel "W"
    born?") and comparisons ("In which city was the elder of X and Y born?"). With
    ``dataset_path`` (FlashRAG jsonl) and ``corpus_path`` (wiki-18 style jsonl) or
    ``retriever_url``, it runs over real NQ / HotpotQA files instead.

    ## Action Space

    A string, up to ``max_action_length`` (65,536) characters: the whole response of one turn,
    optionally with ``<think>...</think>``. It must hold ``<search> query </search>`` or
    ``<answer> text </answer>``.

    With ``protocol="search_r1"`` (default) the response is read exactly as Search-R1's rollout
    reads it (:mod:`agentgym_turn.searchqa.protocol`): it is cut after its first ``</search>``
    (else its first ``</answer>``), and the action is the leftmost complete lower-case
    ``<search>...</search>`` or ``<answer>...</answer>`` pair of the cut text, wherever it stands
    (inside ``<think>`` too), its content stripped; ``<answer></answer>`` is an (empty) answer. A
    response with no such pair (``<ANSWER>x</ANSWER>``, ``< answer >``, an unclosed tag) is an
    invalid turn.

    With ``protocol="strict"`` the first complete pair *outside* ``<think>`` is the action; tag
    names are case-insensitive; an opening tag nested inside an open pair, a pair closed by the
    other tag (``<search>q</answer>``), an unclosed tag, empty content, or a query longer than
    2,000 characters is an invalid turn (shared parser ``agentgym_turn.core.find_tagged``).

    ## Observation Space

    A string (any Unicode text but lone surrogates and control characters other than newline,
    tab and carriage return), up to ``max_observation_length`` (65,536) characters. ``reset``
    returns the prompt: the rules and the question (``prompt_template`` replaces the wording). A
    search returns Search-R1's block
    ``"\\n\\n<information>Doc 1(Title: \\"T\\") text\\nDoc 2(...) ...</information>\\n\\n"``
    with the top ``topk`` passages, their text unchanged (no-break spaces, soft hyphens, CRLF
    stay). With ``passage_sentences=N`` each passage's text is cut after its ``N``-th sentence
    (title kept): a compact style for small context windows. An invalid turn returns Search-R1's message ("My previous action is invalid ... Let
    me try again."), with the reason added under ``protocol="strict"``. A search on Search-R1's
    final turn (``"search_r1"``, see Episode End) runs nothing and returns the empty block
    ``"\\n\\n<information></information>\\n\\n"``, as ``execute_predictions(do_search=False)`` does;
    under ``"strict"`` a search after the budget is spent says that only an answer is possible now.
    An answer ends the episode and returns ``""`` (``"search_r1"``: Search-R1 shows nothing more)
    or a short receipt (``"strict"``).

    ## Starting State

    A question drawn uniformly (with ``self.np_random``) from the split, or the one chosen with
    ``reset(options={"question_index": i})`` (position in the split) or
    ``options={"question_id": "..."}``.

    ## Rewards

    ``protocol="search_r1"``: Search-R1 scores the whole sequence (prompt, every cut response
    and every observation shown) with ``compute_score_em``: the last ``<answer>...</answer>``
    pair of the sequence, counted only when the sequence holds at least two (the prompt's example
    ``<answer> Paris </answer>`` is one), matched against the gold answers after Search-R1's
    normalisation (lower-case; ASCII punctuation, the words a/an/the and extra whitespace
    removed). Each turn earns the change of that score (the current turn's response counted, its
    observation not, as for Search-R1's final turn), so the rewards of an episode sum to the score
    Search-R1 gives it however it ends: 1.0 or 0.0, usually on the answering turn.
    ``format_penalty`` defaults to 0.0 (Search-R1 has none).

    ``protocol="strict"``: answering earns the exact match of the answer (1.0 or 0.0); searches
    earn 0; an invalid turn earns ``format_penalty`` (default -0.1).

    ## Episode End

    Terminated when the agent answers. Truncated at the registered turn limit,
    ``max_episode_steps = 5``: Search-R1 with ``max_turns=4`` (``max_searches``), four turns that
    may search and a final turn that cannot. Under ``"search_r1"`` that final turn is Search-R1's
    (``run_llm_loop``'s last rollout, ``execute_predictions(do_search=False)``): a search there is a
    valid, ineffective turn that queries nothing and returns the empty ``<information>`` block,
    and the reward scores the sequence with the turn's cut response and without that block, as
    Search-R1's scorer does; an answer or an invalid turn there acts as on any turn. Any turn
    after ``max_searches`` is such a final turn, so the registered limit should stay
    ``max_searches + 1``. Under ``"strict"`` searches past ``max_searches`` are refused (a valid,
    ineffective turn with a message) and a search left in the budget runs on the final turn.

    ## Information

    Common keys: `turn`, `action_is_valid`, `action_is_effective` (a search that ran or an
    answer), `success` (`score` is 1.0), `score` (the exact match: of the answer under
    ``"strict"``; of the sequence so far, as Search-R1 would score it if the episode ended now,
    under ``"search_r1"``). Extra keys:

    * `question_id` (str) and `question_type` (str): ``"single_hop"``, ``"bridge"``,
      ``"comparison"``, or ``"dataset"`` for loaded files. A generated id is ``gen-<seed>-<n>``, the file's
      ``id`` otherwise; the seed rebuilds the world and its answers, so a served env sends `question_id`
      only with ``--expert``.
    * `searches` (int): searches run so far.
    * `em` (float) and `f1` (float): exact match and SQuAD token F1 of the answer (0.0 before it).
    * `prediction` (str): the answer scored (``"search_r1"``: the one Search-R1 reads from the
      sequence so far; ``""`` when there is none).
    * `golden_answers` (list[str]): the gold answers (aliases included; the correct letter for multiple
      choice). An oracle: a served env
      (``agentgym-turn serve env``) leaves it out unless started with ``--expert``.
    * `retrieved_ids` (list[str]): ids of the passages shown this turn (``[]`` otherwise; ``""`` for a
      passage from a retriever server that sends no id).
    * `exit_status`, `reward_valid`, `state_key` and `reward_components` (`exact_match`, `format`): the
      fields RL infrastructure reads (``docs/turn-contract.md``); a retriever that fails ends the episode
      with ``exit_status="infra_error"``.

    ## Arguments

    ```python
    import gymnasium as gym
    import agentgym_turn

    env = gym.make("TurnSearchQA-v0", split="test", topk=3, max_searches=4, format_penalty=-0.1)
    ```

    * ``split``: ``"train"`` (default), ``"dev"``, ``"test"`` or ``"all"`` of the generated
      world: questions 0-499 are test, 500-999 dev, the rest train (about 7,000).
    * ``world_seed`` (0), ``world_scale`` (1.0): which world; scale multiplies its size.
    * ``question_types`` (``None``: every type): draw only questions of these types, e.g.
      ``["single_hop"]``, a curriculum for training (``question_index`` then counts within them);
      the split is chosen first, so a question keeps its split.
    * ``content_split`` (``None``): ``"train"``, ``"validation"`` or ``"test"``: keep only the
      questions of ``split`` whose text falls in that split by content (80/10/10,
      :mod:`agentgym_turn.core.splits`), the same in every world and file: a question phrased the
      same way in two worlds is never in training for one and in test for the other.
    * ``dataset_path``, ``corpus_path``: FlashRAG question jsonl and corpus jsonl (``.gz``
      allowed) instead of the generated world (``split`` is then ignored).
    * ``source``: the questions as one object (the first positional argument of the class):
      ``QuestionSource(split="test", world_seed=3, question_types=("single_hop",))``; the keywords
      above (``split`` to ``corpus_path``) build it when it is not given, and giving both is an error
      naming them.
    * ``retriever``: ``"bm25"`` (default), ``"dense"`` (with ``encoder``: a local
      sentence-transformers model directory or an ``Encoder`` object), or any object with
      ``retrieve(queries, topk)``. ``index_dir``: where to save/load the index.
    * ``retriever_url``: use a Search-R1 ``/retrieve`` server instead (``agentgym-turn serve
      retriever`` or Search-R1's own); then ``corpus_path`` is optional. ``retriever_token``: that
      server's token (its ``--token``), sent as ``Authorization: Bearer``.
    * ``topk`` (3): passages per search. ``max_searches`` (4): search budget per episode
      (under ``"search_r1"`` Search-R1's ``max_turns``: the turns that may search).
    * ``passage_sentences`` (``None``: whole passages): show only the first ``N`` sentences of each
      passage (title kept), a compact style for small context windows; the generated world states
      an entity's facts first and its filler sentences last.
    * ``expert_think`` (``True``): ``False`` makes ``expert_action()`` give the action alone,
      without its ``<think>...</think>`` line (shorter demonstrations for small models).
    * ``expert_recall`` (``()``): question templates (names of
      :data:`~agentgym_turn.searchqa.generator.questions.TEMPLATES`, e.g. ``["birth_year"]``) that
      ``expert_action()`` answers at once from memory, with the gold answer and no search: a
      demonstrator that trusts what it knows about some relations, as language models do. On the
      world it was demonstrated on that answer is right; on any other world it is a habit to unlearn
      (the search-QA recipe's SFT start). The default expert always searches.
    * ``expert_recall_rate`` (``1.0``): the share of those questions answered from memory; which ones
      is fixed per question (a CRC-32 of its id), the rest searched as usual. Below 1 the habit is
      a tendency, not a rule: a policy imitating it still searches those questions now and then.
    * ``prompt_template``: replaces the first message; ``{question}``, ``{topk}``,
      ``{max_searches}`` (and ``{options}`` for multiple choice) are filled in, in one pass (braces
      inside a question stay as written). Under ``"search_r1"`` it must show an example answer pair.
    * ``protocol``: ``"search_r1"`` (default: Search-R1's pipeline, tested turn for turn against
      its code) or ``"strict"`` (our stricter parser, see Action Space).
    * ``format_penalty`` (0.0 under ``"search_r1"``, -0.1 under ``"strict"``), ``render_mode`` (``None`` or ``"ansi"``),
      ``max_action_length``, ``max_observation_length``.

    ## Version History

    * v0: Initial version. Default protocol changed to Search-R1's own (``protocol="search_r1"``);
      the earlier parser is ``protocol="strict"``.
    """

    multiple_choice = False
    reset_options = frozenset({"question_id", "question_index"})
    external_kwargs = frozenset({"dataset_path", "corpus_path", "index_dir", "retriever_url"})
    source_keywords = tuple(QUESTION_KEYWORDS)
    #: ``reward_components``: the exact match's change (Search-R1's reward) and the invalid-turn penalty.
    metadata = {**TurnEnv.metadata, "reward_components": ("exact_match", "format")}
    #: The questions, their source, the retriever and the settings: read-only, shared by forks and left out of snapshots.
    shared_attributes = ("source", "_loaded", "_questions", "_by_id", "_retriever", "_retrieval")
    #: Sent by a served env only with --expert: the gold answers, and the id (a generated one names the world seed).
    oracle_info_keys = ("golden_answers", "question_id")

    def __init__(
        self,
        source: QuestionSource | None = None,
        *,
        retriever: str | Retriever = "bm25",
        encoder: Any = None,
        index_dir: str | None = None,
        retriever_url: str | None = None,
        retriever_token: str | None = None,
        topk: int = 3,
        max_searches: int = 4,
        passage_sentences: int | None = None,
        expert_think: bool = True,
        expert_recall: Sequence[str] = (),
        expert_recall_rate: float = 1.0,
        prompt_template: str | None = None,
        protocol: str = "search_r1",
        format_penalty: float | None = None,
        render_mode: str | None = None,
        max_action_length: int = DEFAULT_MAX_ACTION_LENGTH,
        max_observation_length: int = DEFAULT_MAX_OBSERVATION_LENGTH,
        **kwargs: Any,
    ):
        if format_penalty is None:  # Search-R1's reward has no format term; our strict parser's default is -0.1
            format_penalty = 0.0 if protocol == "search_r1" else -0.1
        questions = {name: kwargs.pop(name) for name in list(kwargs) if name in QUESTION_KEYWORDS}
        super().__init__(
            format_penalty=format_penalty,
            render_mode=render_mode,
            max_action_length=max_action_length,
            max_observation_length=max_observation_length,
            **kwargs,
        )  # an unknown keyword fails here
        check_settings(
            protocol=protocol,
            topk=topk,
            max_searches=max_searches,
            passage_sentences=passage_sentences,
            prompt_template=prompt_template,
            expert_recall=expert_recall,
            expert_recall_rate=expert_recall_rate,
        )
        #: The questions asked: a :class:`QuestionSource` (built from the question keywords when not given).
        self.source = question_source(source, questions, type(self).__name__)
        self.topk, self.max_searches, self.passage_sentences = topk, max_searches, passage_sentences
        self.expert_think, self.prompt_template, self.protocol = bool(expert_think), prompt_template, protocol
        self.expert_recall = frozenset((expert_recall,) if isinstance(expert_recall, str) else expert_recall)
        self.expert_recall_rate = float(expert_recall_rate)
        self._retrieval = dict(
            retriever=retriever,
            encoder=encoder,
            index_dir=index_dir,
            retriever_url=retriever_url,
            retriever_token=retriever_token,
        )
        self._attach()
        self._clear_episode()

    @property
    def quick_calls(self) -> frozenset[str]:  # type: ignore[override]
        """Resets and renders are quick; steps too when they search this process's BM25 index (p95 under 6 ms a
        query at a million passages), not a retriever server (the network) or a dense retriever (a model)."""
        c = self._retrieval
        in_process = isinstance(c["retriever"], str) and c["retriever"] == "bm25" and c["retriever_url"] is None
        return frozenset({"reset", "step", "render"} if in_process else {"reset", "render"})

    @property
    def split(self) -> str:
        """The generated world's split the questions come from (:attr:`QuestionSource.split`)."""
        return self.source.split

    def _clear_episode(self) -> None:
        """The episode's state before the first reset."""
        self._question: Question | None = None
        self._searches = 0
        self._queries: list[str] = []
        self._seen: set[str] = set()  # contents of every passage shown this episode
        self._prediction = ""
        self._em = 0.0
        self._f1 = 0.0
        self._answered = False
        self._sequence: list[str] = []  # search_r1: prompt, then each turn's cut response and observation
        self._cut = ""  # search_r1: this turn's response as Search-R1 keeps it

    # ------------------------------------------------------------------ resources
    def _attach(self) -> None:
        """Resolve the questions, their source and the retriever (shared per process)."""
        source, questions = self.source.load()
        if self.multiple_choice and not all(q.choices for q in questions):
            raise ValueError("the multiple-choice env needs questions with 'choices'")
        self._loaded = source
        self._questions = questions
        self._by_id = {q.id: k for k, q in enumerate(questions)}
        c = self._retrieval
        r = c["retriever"]
        if c["retriever_url"] is not None:
            self._retriever: Retriever = HTTPRetriever(c["retriever_url"], token=c.get("retriever_token"))
        elif not isinstance(r, str):
            if not callable(getattr(r, "retrieve", None)):
                raise TypeError("retriever must be 'bm25', 'dense' or an object with retrieve(queries, topk).")
            self._retriever = r
        else:
            if source.corpus is None:
                raise ValueError("an in-process retriever needs corpus_path (or pass retriever_url).")
            self._retriever = local_retriever(
                source.key, source.corpus, r, encoder=c["encoder"], index_dir=c["index_dir"]
            )

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_loaded", "_questions", "_by_id"):
            state.pop(name, None)
        if isinstance(self._retrieval["retriever"], str) or self._retrieval["retriever_url"] is not None:
            state.pop("_retriever", None)  # re-resolved from the process cache
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        user_retriever = state.get("_retriever")
        self._attach()
        if user_retriever is not None:
            self._retriever = user_retriever

    @property
    def questions(self) -> list[Question]:
        """The questions this env draws from (its split)."""
        return self._questions

    @property
    def question(self) -> Question | None:
        """The current episode's question."""
        return self._question

    def task_key(self) -> str | None:
        """The current question's text (:func:`~agentgym_turn.core.splits.content_key`): equal for two
        resets that ask the same question, whatever their seeds or worlds; ``None`` before a reset."""
        return None if self._question is None else content_key(self._question.question)

    # ------------------------------------------------------------------ TurnEnv API
    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if "question_id" in options:
            qid = str(options["question_id"])
            if qid not in self._by_id:
                raise ValueError(f"options['question_id']: no question with id {qid!r} in this env's questions")
            index = self._by_id[qid]
        elif "question_index" in options:
            raw = options["question_index"]
            if not is_int(raw, numpy=True):
                raise ValueError(f"options['question_index'] must be an integer, got {raw!r}")
            index = int(raw)
            if not 0 <= index < len(self._questions):
                raise ValueError(f"options['question_index'] must lie in [0, {len(self._questions)}), got {index}")
        else:
            index = int(self.np_random.integers(0, len(self._questions)))
        self._question = self._questions[index]
        self._searches = 0
        self._queries = []
        self._seen = set()
        self._prediction = ""
        self._em = self._f1 = 0.0
        self._answered = False
        prompt = self._prompt()
        self._sequence = [prompt]
        self._cut = ""
        return prompt, {}

    def _prompt(self) -> str:
        q = self._question
        assert q is not None
        fields = dict(question=q.question, topk=self.topk, max_searches=self.max_searches)
        if self.multiple_choice:
            fields["options"] = self._options_text()
            return _fill(self.prompt_template or DEFAULT_MCQ_PROMPT, **fields)
        return _fill(self.prompt_template or DEFAULT_PROMPT, **fields)

    def _options_text(self) -> str:
        q = self._question
        assert q is not None
        return "\n".join(f"{LETTERS[k]}. {c}" for k, c in enumerate(q.choices))

    def parse_action(self, response: str) -> Any:
        if self.protocol == "search_r1":
            self._cut = cut_response(response)
            found = first_action(self._cut)
            if found is None:
                return InvalidAction("no <search> or <answer> pair")
            return found
        m = find_tagged(response, ("search", "answer"))
        if isinstance(m, InvalidAction):
            return m
        assert isinstance(m, TagMatch)
        if m.tag == "search":
            if len(m.content) > MAX_QUERY_CHARS:
                return InvalidAction(f"The query is {len(m.content)} characters long; the limit is {MAX_QUERY_CHARS}.")
            return ("search", m.content)
        if self.multiple_choice:
            q = self._question
            k = choice_index(m.content, q.choices) if q is not None else None
            if k is None:
                letters = ", ".join(LETTERS[: len(q.choices)]) if q is not None else "A-D"
                return InvalidAction(
                    f"The answer {snippet(m.content)!r} names no option; answer with one letter of {letters}."
                )
            return ("answer", LETTERS[k])
        return ("answer", m.content)

    def _search(self, query: str) -> tuple[str, list[str]]:
        """Run one search: the information block and the ids of the passages shown."""
        hits = self._retriever.retrieve([query], self.topk)[0][: self.topk]
        self._searches += 1
        self._queries.append(query)
        for h in hits:
            self._seen.add(h.document.contents)
        shown = [
            h.document.contents
            if self.passage_sentences is None
            else first_sentences(h.document.contents, self.passage_sentences)
            for h in hits
        ]  # the expert still tracks whole passages (self._seen): cutting changes only what is shown
        return information_block(shown), [h.document.id for h in hits]

    def _budget_message(self) -> str:
        return (
            f"\nMy search budget ({self.max_searches} searches) is used up, so I cannot search again. "
            "I should give the final answer between <answer> and </answer> now.\n"
        )

    def _act(self, action: tuple[str, str]) -> TurnOutcome:
        if self.protocol == "search_r1":
            return self._act_search_r1(action)
        kind, content = action
        q = self._question
        assert q is not None
        if kind == "search":
            if self._searches >= self.max_searches:
                return TurnOutcome(self._budget_message(), 0.0, False, False, {})
            observation, ids = self._search(content)
            return TurnOutcome(observation, 0.0, False, True, {"retrieved_ids": ids})
        # answer
        self._answered = True
        self._prediction = content
        if self.multiple_choice:
            self._em = self._f1 = 1.0 if content == q.answer_letter else 0.0
        else:
            self._em = exact_match(content, q.golden_answers)
            self._f1 = token_f1(content, q.golden_answers)
        # the verdict first, the agent's words quoted after it: they cannot forge the verdict
        receipt = (
            f"\nExact match: {'yes' if self._em == 1.0 else 'no'}. Your final answer: {snippet(content, 200)!r}.\n"
        )
        return TurnOutcome(receipt, self._em, True, True, {}, {"exact_match": self._em})

    # Search-R1: the reward is the score of the whole sequence, so each turn earns the change in that score
    def _rescore(self) -> float:
        """Score the sequence with this turn's cut response (not its observation); return the score's change."""
        q = self._question
        assert q is not None
        if (
            self.multiple_choice
        ):  # no Search-R1 counterpart: read only the agent's turns, so the prompt's example letter never scores
            answer = extract_answer("".join(self._sequence[1:]) + self._cut, min_pairs=1)
        else:
            answer = extract_answer("".join(self._sequence) + self._cut)
        before = self._em
        if answer is None:
            self._prediction, self._em, self._f1 = "", 0.0, 0.0
        elif self.multiple_choice:
            k = choice_index(answer, q.choices)
            self._prediction = LETTERS[k] if k is not None else answer
            self._em = self._f1 = 1.0 if k == q.answer_index else 0.0
        else:
            self._prediction = answer
            self._em = exact_match(answer, q.golden_answers)
            self._f1 = token_f1(answer, q.golden_answers)
        return self._em - before

    def _record(self, observation: str) -> None:
        self._sequence.extend((self._cut, observation))
        self._cut = ""

    def _final_turn(self, ahead: int = 0) -> bool:
        """Whether this turn (``ahead``: that many turns later) is Search-R1's final turn or later (``protocol="search_r1"``):
        ``max_searches`` is its ``max_turns``, so turns 1..max_searches may search and turn max_searches + 1 (the
        registered limit) cannot; nor can any later one."""
        return self.turn + ahead > self.max_searches

    def _act_search_r1(self, action: tuple[str, str]) -> TurnOutcome:
        kind, content = action
        reward = self._rescore()
        if kind == "answer":
            self._answered = True
            self._record("")
            return TurnOutcome("", reward, True, True, {}, {"exact_match": reward})
        if self._final_turn():
            # run_llm_loop's final rollout: execute_predictions(do_search=False) runs no search and returns an empty
            # block, which Search-R1 then drops from the sequence (the scorer sees this turn's cut response only)
            observation, info, effective = information_block([]), {}, False
        else:
            observation, ids = self._search(content)
            info, effective = {"retrieved_ids": ids}, True
        self._record(observation)
        return TurnOutcome(observation, reward, False, effective, info, {"exact_match": reward})

    def shown_reward(self, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]) -> float:
        """Search-R1 scores the whole sequence, so a turn's reward can move with an ``<answer>`` written inside a
        search; shown mid-episode it would tell the agent whether that hidden answer is right (an oracle to
        enumerate). A chat view shows only the format part until the episode ends."""
        if self.protocol != "search_r1" or terminated or truncated:
            return reward
        return 0.0 if info.get("action_is_valid", True) else self.format_penalty

    def _invalid_outcome(self, problem: InvalidAction) -> TurnOutcome:
        if self.protocol == "search_r1":
            change = self._rescore()
            self._record(INVALID_MESSAGE)
            return TurnOutcome(
                INVALID_MESSAGE,
                change + self.format_penalty,
                False,
                False,
                {},
                {"exact_match": change, "format": self.format_penalty},
            )
        return TurnOutcome(
            f"\nMy previous action is invalid ({problem.message.rstrip('.')}). {_HOW}\n",
            self.format_penalty,
            False,
            False,
            {},
        )

    def _extra_info(self) -> dict[str, Any]:
        q = self._question
        if q is None:
            golds: list[str] = []
        else:
            golds = [q.answer_letter] if self.multiple_choice else list(q.golden_answers)
        return {
            "question_id": q.id if q is not None else "",
            "question_type": q.type if q is not None else "",
            "searches": self._searches,
            "em": self._em,
            "f1": self._f1,
            "prediction": self._prediction,
            "golden_answers": golds,
            "retrieved_ids": [],
        }

    def _state_fields(self) -> Any:
        """The question, the number of searches, the passages retrieved, the answer so far and, under Search-R1's
        protocol, the sequence its reward scores (the order of earlier queries changes nothing ahead otherwise)."""
        q = self._question
        if q is None:
            return None
        return [
            q.id,
            q.question,
            self._searches,
            sorted(self._seen),
            self._prediction,
            self._em,
            self._f1,
            self._answered,
            self._sequence if self.protocol == "search_r1" else None,
        ]

    def _state_text(self) -> str:
        q = self._question
        if q is None:
            return ""
        lines = [f"Question: {q.question}"]
        if self.multiple_choice:
            lines.append(self._options_text())
        lines.append(f"Searches: {self._searches}/{self.max_searches}")
        lines.extend(f"  query {k + 1}: {query}" for k, query in enumerate(self._queries))
        if self._answered:
            lines.append(f"Answer: {self._prediction} (exact match {self._em:.0f}, F1 {self._f1:.2f})")
        return "\n".join(lines)

    def _success(self) -> bool:
        return self._em == 1.0

    def _score(self) -> float:
        return float(self._em)

    # ------------------------------------------------------------------ oracle
    def _recalls(self, q: Question) -> bool:
        """Whether the expert answers ``q`` from memory (its template recalled): fixed per question."""
        return zlib.crc32(q.id.encode()) % 10_000 < round(self.expert_recall_rate * 10_000)

    def expert_action(self) -> str:
        """An oracle searcher (:func:`~.expert.oracle_response`): it searches until it has read
        every supporting passage of the question's plan, then answers with the gold answer; for
        loaded datasets it searches the question once and answers. With ``expert_think=False``
        the response is the action alone. On a question whose template is in ``expert_recall`` it
        answers the gold answer at its first turn, without searching (on ``expert_recall_rate`` of them)."""
        q = self._question
        if q is None:
            return "<answer> unknown </answer>"
        if q.template in self.expert_recall and not self._queries and self._recalls(q):
            final = q.answer_letter if self.multiple_choice else q.golden_answers[0]
            action = f"<answer> {final} </answer>"
            return f"<think>I know this one.</think>\n{action}" if self.expert_think else action
        return oracle_response(
            q,
            passages=self._loaded.corpus.contents if self._loaded.corpus is not None else None,
            seen=self._seen,
            queries=self._queries,
            can_search=self._searches < self.max_searches
            and not (self.protocol == "search_r1" and self._final_turn(ahead=1)),
            multiple_choice=self.multiple_choice,
            max_query_chars=MAX_QUERY_CHARS,
            think=self.expert_think,
        )


class TurnSearchQAMCQEnv(TurnSearchQAEnv):
    """Multiple-choice search QA: the same world and protocol, answered with a letter A-D.

    ## Description

    The multiple-choice variant of :class:`TurnSearchQAEnv`, standing in for the medical
    multiple-choice sets (MedQA, MedMCQA, ...) that the ST-PPO paper trains on. Every generated
    question comes with four options: its gold and the golds of three other questions of the
    same split and template (same answer type at least), which show the same four options: the
    questions are dealt into such blocks, so every wrong option is the answer to a real question
    drawn by the same process, and any reading of the options alone (with how often each string
    recurs in the world) is right on one question of four in a block. The correct letter is
    uniform, and no options-only strategy (longest option, numeric rank, the most or least
    frequent string in the world, shape, a conditional logit and boosted trees on option
    features trained on other worlds) scores above 28% on 1,000 questions of each of three world
    seeds (``benchmarks/searchqa_mcq_leak.py``; chance is 25%). A FlashRAG file with ``choices``
    runs the same way.

    ## Action Space

    As :class:`TurnSearchQAEnv`: ``<search> query </search>`` or ``<answer> X </answer>``, read by
    the chosen ``protocol``. The answer names an option by a letter alone or leading (``B``,
    ``(B)``, ``B.``, ``B) text``, ``Option B``) or by the exact text of an option. Under
    ``"search_r1"`` any answer ends the episode (one naming no option scores 0) and the answer
    scored is the last pair of the agent's own turns (Search-R1 has no multiple choice; the
    prompt's example letter must never score); under ``"strict"`` an answer naming no option is an
    invalid turn (the agent may answer again).

    ## Observation Space

    As :class:`TurnSearchQAEnv`; the prompt lists the options as ``A. ...`` lines.

    ## Starting State

    As :class:`TurnSearchQAEnv`.

    ## Rewards

    1.0 for the correct letter, 0.0 for another; ``format_penalty`` (default -0.1) for an
    invalid turn. Random guessing scores 0.25 on average.

    ## Episode End

    As :class:`TurnSearchQAEnv`: terminated on an answer, truncated after ``max_episode_steps =
    5`` turns (at most ``max_searches = 4`` searches).

    ## Information

    Common keys `turn`, `action_is_valid`, `action_is_effective`, `success`, `score` (1.0 for
    the correct letter), and as in :class:`TurnSearchQAEnv`: `question_id`, `question_type`,
    `searches`, `em`, `f1` (equal to `em` here), `prediction` (the chosen letter),
    `golden_answers` (the correct letter), `retrieved_ids`, `exit_status`, `reward_valid`, `state_key`
    and `reward_components` (`exact_match`, `format`).

    ## Arguments

    ```python
    import gymnasium as gym
    import agentgym_turn

    env = gym.make("TurnSearchQA-MCQ-v0", split="test")
    ```

    The arguments of :class:`TurnSearchQAEnv`.

    ## Version History

    * v0: Initial version.
    """

    multiple_choice = True
