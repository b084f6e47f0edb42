"""iclr25.lm: a tiny causal language model, its word-level tokenizer and a procedural toy language.

>>> from iclr25.lm import toy_vocab, TinyLMConfig, pretrained_toy_lm
>>> model, info = pretrained_toy_lm(steps=800)          # trained once, then cached
>>> vocab = toy_vocab()
>>> logits = model(torch.tensor([vocab.encode("<bos> tell topic the ball ?")]))

Chapters that need a language model (black-box prompting, editing, alignment, distillation,
pruning) build on :class:`TinyLM` and the corpora of :mod:`iclr25.lm.language`.
"""

from iclr25.lm.language import (CUES, TASKS, TOPIC_NOUNS, VERBALIZERS, Sentence, TaskData,
                                few_shot_split, make_task_data, pretraining_batch,
                                pretraining_document, toy_vocab)
from iclr25.lm.model import TinyLM, TinyLMConfig
from iclr25.lm.train import (generate, last_token_logits, next_token_loss, pretrained_toy_lm,
                             sequence_nll, train_lm)
from iclr25.lm.vocab import Vocab, pad_batch

__all__ = ["CUES", "TASKS", "TOPIC_NOUNS", "VERBALIZERS", "Sentence", "TaskData", "TinyLM",
           "TinyLMConfig", "Vocab", "few_shot_split", "generate", "last_token_logits",
           "make_task_data", "next_token_loss", "pad_batch", "pretrained_toy_lm",
           "pretraining_batch", "pretraining_document", "sequence_nll", "toy_vocab", "train_lm"]
