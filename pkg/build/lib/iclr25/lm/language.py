"""A procedural toy language with prompted classification tasks.

Sentences are short noun phrases joined by ``and``::

    the very lovely guitar and a dull song

Every sentence has a *sentiment* (do positive adjectives outnumber negative ones?) and a
*topic* (the topic of most of its nouns: sport, music, food or tech). A pre-training document
asks about one of them through a **cue word** hidden among instruction words in a prefix::

    <bos> please tell feeling now  the very lovely guitar and a dull song ? good <eos>
          \\________prefix_______/  \\___________sentence___________/   answer

(``sentiment``/``feeling`` ask for the sentiment, ``topic``/``subject`` for the topic; without a
cue the document is plain text ending in ``.``). A language model trained on this corpus answers
the question the prefix asks (and guesses at random if the prefix names no task), so the
prefix acts as a *prompt*: a downstream user who only sees
the model's answer logits must find prompt words that make it solve their task.
Only the generators live here; the model is :mod:`iclr25.lm.model`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from iclr25.lm.vocab import Vocab, pad_batch

TOPIC_NOUNS: dict[str, tuple[str, ...]] = {
    "sport": ("ball", "goal", "team", "match", "coach", "race", "court", "player"),
    "music": ("song", "band", "guitar", "drum", "piano", "singer", "album", "concert"),
    "food": ("bread", "soup", "apple", "cheese", "rice", "cake", "pasta", "salad"),
    "tech": ("phone", "laptop", "robot", "code", "chip", "screen", "server", "app"),
}
POSITIVE = ("great", "lovely", "nice", "superb", "brilliant", "fine", "happy", "amazing",
            "wonderful", "excellent")
NEGATIVE = ("awful", "terrible", "poor", "horrible", "dull", "nasty", "sad", "boring", "ugly",
            "weak")
DETERMINERS = ("the", "a", "this", "my", "our")
INTENSIFIERS = ("very", "really", "quite", "so")
#: words of the prompt prefix that carry no task (the distractors of a prompt search)
INSTRUCTION_WORDS = ("please", "tell", "me", "now", "answer", "question", "text", "review",
                     "say", "what", "is", "it", "of", "this", "the")
CUES: dict[str, tuple[str, ...]] = {"sentiment": ("sentiment", "feeling"),
                                    "topic": ("topic", "subject")}
VERBALIZERS: dict[str, tuple[str, ...]] = {"sentiment": ("bad", "good"),
                                           "topic": ("sport", "music", "food", "tech")}
QUESTION, PERIOD, AND = "?", ".", "and"
TASKS = tuple(CUES)
#: bump when the generators change: it is part of the cache key of trained models
CORPUS_VERSION = "toy-v4"


def toy_vocab() -> Vocab:
    """The vocabulary of the toy language (about 120 words; order fixed, so ids are stable)."""
    words: list[str] = []
    for group in (DETERMINERS, INTENSIFIERS, POSITIVE, NEGATIVE, *TOPIC_NOUNS.values(),
                  INSTRUCTION_WORDS, *CUES.values(), *VERBALIZERS.values(), (QUESTION, PERIOD, AND)):
        words += [w for w in group if w not in words]
    return Vocab(words)


def check_task(task: str) -> str:
    """Return ``task`` if it is a task of the toy language, else a ``ValueError`` naming them."""
    if task not in CUES:
        raise ValueError(f"unknown task {task!r}; valid tasks: {', '.join(TASKS)}")
    return task


@dataclass(frozen=True)
class Sentence:
    """A generated sentence and the counts that define its labels."""

    words: tuple[str, ...]
    n_pos: int
    n_neg: int
    topic_counts: tuple[int, ...]  # nouns per topic, in TOPIC_NOUNS order

    def label(self, task: str, *, ties: str = "negative") -> int:
        """Class index of this sentence for ``task`` (index into ``VERBALIZERS[task]``).

        Sentiment is 1 (good) iff positive adjectives outnumber negative ones; a tie (only
        possible with an even number of adjectives, never in pre-training) is ``bad`` when
        ``ties="negative"`` and ``good`` when ``ties="positive"``.
        """
        if check_task(task) == "sentiment":
            if ties not in ("negative", "positive"):
                raise ValueError(f"ties must be 'negative' or 'positive', got {ties!r}")
            if self.n_pos == self.n_neg:
                return int(ties == "positive")
            return int(self.n_pos > self.n_neg)
        return int(np.argmax(self.topic_counts))


def sample_sentence(rng: np.random.Generator, *, n_phrases: int, n_adj: int,
                    topic: int, n_foreign: int = 0) -> Sentence:
    """One sentence of ``n_phrases`` phrases ``[det] [intensifier adj | adj] noun``.

    Parameters
    ----------
    n_adj : int
        Number of phrases that carry an adjective (each positive or negative with prob. 1/2).
    topic : int
        Index of the main topic; ``n_foreign`` nouns come from other topics (keep it below
        half the phrases so the main topic stays the majority).
    """
    if n_phrases < 1 or not 0 <= n_adj <= n_phrases or not 0 <= 2 * n_foreign < n_phrases:
        raise ValueError(f"bad sentence shape: n_phrases={n_phrases}, n_adj={n_adj}, n_foreign={n_foreign}")
    topics = list(TOPIC_NOUNS)
    adj_slots = set(rng.choice(n_phrases, size=n_adj, replace=False).tolist())
    foreign_slots = set(rng.choice(n_phrases, size=n_foreign, replace=False).tolist())
    words: list[str] = []
    n_pos = n_neg = 0
    counts = [0] * len(topics)
    for k in range(n_phrases):
        if k:
            words.append(AND)
        if rng.random() < 0.7:
            words.append(DETERMINERS[rng.integers(len(DETERMINERS))])
        if k in adj_slots:
            if rng.random() < 0.3:
                words.append(INTENSIFIERS[rng.integers(len(INTENSIFIERS))])
            if rng.random() < 0.5:
                words.append(POSITIVE[rng.integers(len(POSITIVE))])
                n_pos += 1
            else:
                words.append(NEGATIVE[rng.integers(len(NEGATIVE))])
                n_neg += 1
        t = topic
        if k in foreign_slots:
            t = int(rng.choice([i for i in range(len(topics)) if i != topic]))
        nouns = TOPIC_NOUNS[topics[t]]
        words.append(nouns[rng.integers(len(nouns))])
        counts[t] += 1
    return Sentence(tuple(words), n_pos, n_neg, tuple(counts))


def pretraining_sentence(rng: np.random.Generator) -> Sentence:
    """A sentence from the pre-training distribution: an odd number of adjectives (no ties)."""
    n_phrases = int(rng.integers(1, 4))
    n_adj = 3 if (n_phrases == 3 and rng.random() < 0.5) else 1
    n_foreign = int(n_phrases == 3 and rng.random() < 0.3)
    return sample_sentence(rng, n_phrases=n_phrases, n_adj=n_adj,
                           topic=int(rng.integers(len(TOPIC_NOUNS))), n_foreign=n_foreign)


def downstream_sentence(rng: np.random.Generator, task: str) -> Sentence:
    """A sentence from the *shifted* downstream distribution of ``task``.

    Sentiment: half the sentences carry two adjectives, which never happens in pre-training;
    a mixed pair is a tie, labelled ``bad`` (positive must win strictly). Topic: sentences are longer
    and more often contain a foreign noun than in pre-training.
    """
    check_task(task)
    topic = int(rng.integers(len(TOPIC_NOUNS)))
    if task == "sentiment":
        n_phrases = int(rng.integers(2, 4))
        n_adj = 2 if rng.random() < 0.5 else (1 if n_phrases == 2 else 3)
        return sample_sentence(rng, n_phrases=n_phrases, n_adj=n_adj, topic=topic,
                               n_foreign=int(n_phrases == 3 and rng.random() < 0.3))
    return sample_sentence(rng, n_phrases=3, n_adj=int(rng.integers(1, 3)), topic=topic,
                           n_foreign=int(rng.random() < 0.7))


def prompt_prefix(rng: np.random.Generator, length: int, cue: str | None) -> list[str]:
    """``length`` instruction words with ``cue`` (if any) at a uniformly random position."""
    words = [INSTRUCTION_WORDS[i] for i in rng.integers(len(INSTRUCTION_WORDS), size=length)]
    if cue is not None:
        if length < 1:
            raise ValueError("a cue needs a prefix of length >= 1")
        words[int(rng.integers(length))] = cue
    return words


def pretraining_document(rng: np.random.Generator, *, max_prefix: int = 5,
                         p_question: float = 0.85, p_blind: float = 0.0) -> tuple[list[str], int]:
    """One pre-training document as words, and the index of its answer word (-1 if none or
    if the answer is random).

    With probability ``p_question``: ``<bos> prefix-with-cue sentence ? answer <eos>`` for a
    uniformly chosen task; with probability ``p_blind`` a question without a cue, whose answer
    is a uniformly random label word of any task (a question that names no task has no
    answer); otherwise plain text ``<bos> prefix sentence . <eos>``.
    """
    sent = pretraining_sentence(rng)
    length = int(rng.integers(1, max_prefix + 1))
    u = rng.random()
    if u >= p_question and u < p_question + p_blind:
        labels = [w for ws in VERBALIZERS.values() for w in ws]
        words = ["<bos>", *prompt_prefix(rng, length, None), *sent.words, QUESTION,
                 labels[int(rng.integers(len(labels)))], "<eos>"]
        return words, -1  # a random answer: ordinary weight
    if u < p_question:
        task = TASKS[int(rng.integers(len(TASKS)))]
        cue = CUES[task][int(rng.integers(len(CUES[task])))]
        answer = VERBALIZERS[task][sent.label(task)]
        words = ["<bos>", *prompt_prefix(rng, length, cue), *sent.words, QUESTION, answer, "<eos>"]
        return words, len(words) - 2
    words = ["<bos>", *prompt_prefix(rng, length, None), *sent.words, PERIOD, "<eos>"]
    return words, -1


def pretraining_batch(rng: np.random.Generator, vocab: Vocab, batch_size: int, *,
                      answer_weight: float = 4.0, max_prefix: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of pre-training documents for next-token training.

    Returns
    -------
    ids : LongTensor, shape (B, T)
        Right-padded token ids.
    weights : FloatTensor, shape (B, T)
        Weight of the next-token loss *predicting* position t (0 on padding and on ``<bos>``,
        ``answer_weight`` on answer words, 1 elsewhere).
    """
    docs = [pretraining_document(rng, max_prefix=max_prefix) for _ in range(batch_size)]
    ids, lengths = pad_batch([vocab.encode(w) for w, _ in docs], vocab.pad_id)
    weights = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).float()
    weights[:, 0] = 0.0
    for b, (_, ans) in enumerate(docs):
        if ans >= 0:
            weights[b, ans] = answer_weight
    return ids, weights


@dataclass(frozen=True)
class TaskData:
    """Labelled sentences of one task: ``sentences[i]`` has class ``labels[i]``."""

    task: str
    sentences: tuple[tuple[str, ...], ...]
    labels: torch.Tensor  # LongTensor (N,)

    def __len__(self) -> int:
        return len(self.sentences)


def make_task_data(task: str, n: int, rng: np.random.Generator, *,
                   per_class: bool = False, shifted: bool = True, ties: str = "negative") -> TaskData:
    """``n`` labelled sentences of ``task`` (``n`` per class if ``per_class``: a k-shot set).

    ``shifted=True`` draws from :func:`downstream_sentence`, else from the pre-training
    distribution. ``ties`` labels a sentiment tie (as many positive as negative adjectives):
    ``"negative"`` (``bad``) or ``"positive"`` (``good``), see :meth:`Sentence.label`.
    """
    n_classes = len(VERBALIZERS[check_task(task)])
    want = {c: n for c in range(n_classes)} if per_class else None
    sents: list[Sentence] = []
    while (sum(want.values()) if want else n - len(sents)) > 0:
        s = downstream_sentence(rng, task) if shifted else pretraining_sentence(rng)
        y = s.label(task, ties=ties)
        if want is not None:
            if want[y] == 0:
                continue
            want[y] -= 1
        sents.append(s)
    order = rng.permutation(len(sents)) if per_class else np.arange(len(sents))
    sents = [sents[i] for i in order]
    return TaskData(task, tuple(s.words for s in sents),
                    torch.tensor([s.label(task, ties=ties) for s in sents], dtype=torch.long))


def few_shot_split(task: str, k_shot: int, n_test: int, seed: int, *,
                   ties: str = "negative") -> dict[str, TaskData]:
    """The paper's few-shot protocol: ``k_shot`` examples per class for train and for dev,
    and a large test set, all from the shifted downstream distribution of ``task``.

    ``ties`` is the downstream labelling convention of a sentiment tie (see
    :meth:`Sentence.label`)."""
    rng = np.random.default_rng([seed, TASKS.index(check_task(task)), 7])
    return {"train": make_task_data(task, k_shot, rng, per_class=True, ties=ties),
            "dev": make_task_data(task, k_shot, rng, per_class=True, ties=ties),
            "test": make_task_data(task, n_test, rng, ties=ties)}
