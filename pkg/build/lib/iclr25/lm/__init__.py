"""iclr25.lm: a tiny causal language model (:class:`TinyLM`), word-level tokenizers, procedural
corpora, a pre-trained *world* model, and the tools to probe, edit, prune, unlearn and align it.

The world kit (editing/compression/unlearning, Booster, weak-LLM feedback, efficient LMs)::

    import numpy as np, torch
    from iclr25.lm import (load_world_lm, world_report, toxin_partition, refusal_examples,
                           harmful_examples, encode_examples, answer_nll, sequence_logprob,
                           generate_responses, moderation_flag, world_batch, key_covariance,
                           get_mlp_weights, set_mlp_weights, linear_inputs, fact_accuracy)

    model, world = load_world_lm("base", device=device)   # committed checkpoint + its world
    vocab = world.vocab
    world_report(model, world)              # fact, paraphrase, MC and refusal rates, all in [0, 1]
    parts = toxin_partition(world, seed)    # {"align": 20 toxins, "attack": 10, "val": 10, "eval": 20}
    batch = encode_examples(vocab, refusal_examples(world, parts["align"])).to(device)
    loss = answer_nll(model, batch)         # SFT loss on the response tokens only
    logp = sequence_logprob(model, batch)   # (B,) summed response log-probs (DPO), differentiable
    prompts = [e.prompt for e in harmful_examples(world, parts["eval"], templates=range(4))]
    answers = generate_responses(model, vocab, prompts)          # greedy, stops at <eos>
    harmful_score = np.mean([moderation_flag(a) for a in answers])
    ids, mask = world_batch(world, np.random.default_rng(0), 64)  # calibration documents
    C = key_covariance(model, ids, layer=0, mask=mask)            # (d_ff, d_ff) K^T K / n, ROME
    X = linear_inputs(model, ids, "blocks.1.mlp.0", mask)         # (n, d) Wanda / SparseGPT inputs
    W = get_mlp_weights(model, 0).W_out; set_mlp_weights(model, 0, W_out=W + dW)  # an edit
    fact_accuracy(model, world, template=1)                       # exact match, one phrasing

Modules: :mod:`~iclr25.lm.world` (the world, its phrasings, oracles: gold reward, moderation),
:mod:`~iclr25.lm.splits` (the chapters' train/eval splits), :mod:`~iclr25.lm.probes` (fact
queries, multiple choice, the report), :mod:`~iclr25.lm.data` (examples and masked batches),
:mod:`~iclr25.lm.evaluate` (log-probs, generation, accuracy, perplexity), :mod:`~iclr25.lm.hooks`
(MLP weights, keys, calibration inputs, additive interventions), :mod:`~iclr25.lm.checkpoints`
(loading) and :mod:`~iclr25.lm.pretrain_world` (the script that makes the checkpoints).

The toy prompting language of ``theory/zo-pog`` (:mod:`~iclr25.lm.language`)::

    from iclr25.lm import toy_vocab, pretrained_toy_lm
    model, info = pretrained_toy_lm(steps=800)          # trained once, then cached
    logits = model(torch.tensor([toy_vocab().encode("<bos> tell topic the ball ?")]))
"""

from iclr25.lm.checkpoints import checkpoint_meta, load_world_lm
from iclr25.lm.data import Example, MCItem, SeqBatch, encode_examples, encode_pairs, token_position
from iclr25.lm.evaluate import (answer_nll, generate_ids, generate_responses, mc_accuracy,
                                mc_logprobs, next_token_accuracy, next_token_logprobs,
                                next_token_margin, perplexity, score_examples, sequence_logprob,
                                token_logprobs)
from iclr25.lm.hooks import (MLPWeights, add_to_block_output, attention_probs, add_to_mlp_output, capture_inputs,
                             get_mlp_weights, key_covariance, linear_inputs, mlp_in, mlp_keys,
                             mlp_out, set_mlp_weights, transformer_linears)
from iclr25.lm.language import (CUES, TASKS, TOPIC_NOUNS, VERBALIZERS, Sentence, TaskData,
                                few_shot_split, make_task_data, pretraining_batch,
                                pretraining_document, toy_vocab)
from iclr25.lm.model import TinyLM, TinyLMConfig
from iclr25.lm.probes import (fact_accuracy, fact_queries, mc_fact_items, mc_general_items,
                              mc_hazard_items, mc_recipe_items, paraphrase_accuracy, world_report)
from iclr25.lm.splits import (Edit, EditSplit, PreferencePair, PreferenceSplit, attack_examples,
                              dish_partition, edit_examples, edit_split, forget_texts,
                              harmful_examples, heldout_texts, preference_pairs, preference_prompt,
                              preference_split, recipe_examples, refusal_examples, retain_texts,
                              sample_candidate, sentiment_examples, toxin_partition)
from iclr25.lm.train import (generate, last_token_logits, next_token_loss, pretrained_toy_lm,
                             sequence_nll, train_lm)
from iclr25.lm.vocab import Vocab, pad_batch
from iclr25.lm.world import (World, build_world, gold_reward, is_refusal, moderation_flag,
                             world_batch, world_vocab)

__all__ = [
    # model, tokenizer, training (shared)
    "TinyLM", "TinyLMConfig", "Vocab", "pad_batch", "train_lm", "next_token_loss", "generate",
    "last_token_logits", "sequence_nll",
    # the toy prompting language (theory/zo-pog)
    "CUES", "TASKS", "TOPIC_NOUNS", "VERBALIZERS", "Sentence", "TaskData", "few_shot_split",
    "make_task_data", "pretraining_batch", "pretraining_document", "pretrained_toy_lm", "toy_vocab",
    # the world
    "World", "build_world", "world_vocab", "world_batch", "gold_reward", "is_refusal",
    "moderation_flag", "load_world_lm", "checkpoint_meta",
    # examples and evaluation
    "Example", "MCItem", "SeqBatch", "encode_examples", "encode_pairs", "token_position",
    "token_logprobs", "sequence_logprob", "answer_nll", "score_examples", "next_token_logprobs",
    "next_token_accuracy", "next_token_margin", "mc_logprobs", "mc_accuracy", "generate_ids",
    "generate_responses", "perplexity",
    # probes
    "fact_queries", "fact_accuracy", "paraphrase_accuracy", "mc_fact_items", "mc_recipe_items",
    "mc_hazard_items", "mc_general_items", "world_report",
    # splits
    "toxin_partition", "dish_partition", "refusal_examples", "harmful_examples", "recipe_examples",
    "sentiment_examples", "attack_examples", "Edit", "EditSplit", "edit_split", "edit_examples",
    "forget_texts", "retain_texts", "heldout_texts", "preference_prompt", "sample_candidate",
    "PreferencePair", "preference_pairs", "PreferenceSplit", "preference_split",
    # hooks
    "MLPWeights", "mlp_in", "mlp_out", "get_mlp_weights", "set_mlp_weights", "mlp_keys",
    "key_covariance", "linear_inputs", "capture_inputs", "transformer_linears",
    "add_to_mlp_output", "add_to_block_output", "attention_probs",
]
