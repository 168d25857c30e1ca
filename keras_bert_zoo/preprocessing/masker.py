"""`MaskedLMMasker`: BERT's masked-LM corruption as a TF preprocessing layer."""

import os

import keras
import tensorflow as tf

from keras_bert_zoo.errors import ArgumentTypeError, UsageError
from keras_bert_zoo.files import write_text
from keras_bert_zoo.preprocessing.base import PreprocessingLayer
from keras_bert_zoo.preprocessing.chinese_words import JiebaWordBoundaries, load_jieba

__all__ = ["MaskedLMMasker"]


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class MaskedLMMasker(PreprocessingLayer):
    """Chooses positions to predict and corrupts them, as the original BERT recipe.

    Per sequence, `round(selection_rate * candidates)` positions are chosen
    (at least 1, at most `max_predictions`), where candidates are all tokens except
    `unselectable_token_ids` (`[CLS]`, `[SEP]`, `[PAD]`). Of the chosen tokens 80%
    become `[MASK]`, 10% a random token and 10% stay unchanged: the model must keep a
    good representation of every token, not only of `[MASK]`.

    Selection works on *units*: single tokens by default; whole words with
    `whole_word_masking=True` (all pieces of a word are chosen together, as the
    original `--do_whole_word_mask`); and spans of 1..`max_ngram` consecutive words
    (tokens without whole-word masking) with `max_ngram > 1` (ALBERT-style n-gram
    masking). Units are visited in a random order; each is taken if it fits in what
    is left of the budget and skipped otherwise (the original's `continue`), so a
    word is never split and the budget is filled whenever the remaining units allow.

    N-gram spans: the candidate words of a row are cut into consecutive spans whose
    lengths are drawn independently and uniformly from 1..`max_ngram`; only the span
    that reaches the row's last candidate word is cut short there. Spans are counted
    over candidates only, so a span can run from the last word of segment A to the
    first of segment B (as ALBERT's n-grams over its candidate list); `[SEP]` itself
    is never chosen. Since the last slots of a budget are filled by whatever still
    fits, chosen spans are slightly shorter than the drawn ones (on WikiText-2 at
    length 128, max_ngram=3: 38% / 32% / 30% of chosen spans have 1 / 2 / 3 words).

    Memory is O(batch * seq) (segment sums, gathers and sorts; no [batch, seq, seq]
    tensor).

    Everything is TF ops on the whole batch (runs in `tf.data` and SavedModels).
    Call it in the input pipeline, not in the model, so every epoch draws new masks
    (dynamic masking, RoBERTa); pass `seed=[a, b]` per call for reproducible runs.

    Args:
        vocabulary_size: int, random replacements are drawn from `[0, vocabulary_size)`
            excluding the unselectable ids.
        mask_token_id: int, id of `[MASK]`.
        unselectable_token_ids: list of int, never chosen (`[CLS]`, `[SEP]`, `[PAD]`).
        max_predictions: int, static size of the outputs (20 at length 128).
        selection_rate: float, 0.15.
        mask_token_rate: float, share of chosen tokens set to `[MASK]` (0.8).
        random_token_rate: float, share set to a random token (0.1).
        whole_word_masking: bool, choose whole words. Word boundaries come from the
            `word_ids` call argument or, when absent, from `vocabulary` (a piece
            starting with `##` continues the previous word, the original rule).
        whole_word_segmenter: `"wordpiece"` (the `##` rule alone; every Chinese
            character is a word) or `"jieba"`: runs of CJK ideographs are cut into
            words by jieba (HFL's Chinese-BERT-wwm), the `##` rule elsewhere; see
            `keras_bert_zoo.preprocessing.chinese_words`. jieba runs in
            `tf.numpy_function`: use it in `tf.data`, not in a SavedModel.
        vocabulary: list of str or path to `vocab.txt`, needed for whole-word
            masking without `word_ids`.
        max_ngram: int, >1 chooses spans of 1..max_ngram units (uniform length, see above).
        seed: int, op seed when no per-call `seed` is given.

    Call args:
        token_ids: int Tensor `[batch, seq]` or `[seq]` (packed, padded).
        word_ids: optional int Tensor like `token_ids`, the word index of each
            token, -1 for special tokens and padding.
        seed: optional int Tensor `[2]`, a stateless seed (e.g. from the element's
            index in the dataset).

    Returns:
        dict: `token_ids` (corrupted), `mask_positions` int32 `[batch, max_predictions]`
        ascending and 0-padded, `mask_ids` (the original ids there), `mask_weights`
        float32 (1 real, 0 padding slot).

    Examples:
    >>> from keras_bert_zoo import MaskedLMMasker
    >>> masker = MaskedLMMasker(vocabulary_size=100, mask_token_id=4,
    ...                         unselectable_token_ids=[0, 2, 3], max_predictions=3)
    >>> out = masker([[2, 10, 11, 12, 13, 14, 15, 16, 17, 3, 0, 0]], seed=[1, 2])
    >>> int(out["mask_weights"].numpy().sum())  # round(0.15 * 8) = 1
    1
    """

    def __init__(
        self,
        vocabulary_size,
        mask_token_id,
        unselectable_token_ids=(0,),
        max_predictions=20,
        selection_rate=0.15,
        mask_token_rate=0.8,
        random_token_rate=0.1,
        whole_word_masking=False,
        vocabulary=None,
        max_ngram=1,
        seed=None,
        whole_word_segmenter="wordpiece",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not 0 < selection_rate <= 1:
            raise UsageError(f"selection_rate must be in (0, 1], got {selection_rate}.")
        if mask_token_rate < 0 or random_token_rate < 0 or mask_token_rate + random_token_rate > 1:
            raise UsageError(
                f"mask_token_rate={mask_token_rate} and random_token_rate={random_token_rate} must be "
                "non-negative and sum to at most 1 (the rest stays unchanged)."
            )
        if max_predictions < 1 or max_ngram < 1:
            raise UsageError(f"max_predictions ({max_predictions}) and max_ngram ({max_ngram}) must be >= 1.")
        self.vocabulary_size = int(vocabulary_size)
        self.mask_token_id = int(mask_token_id)
        self.unselectable_token_ids = [int(i) for i in unselectable_token_ids]
        self.max_predictions = int(max_predictions)
        self.selection_rate = float(selection_rate)
        self.mask_token_rate = float(mask_token_rate)
        self.random_token_rate = float(random_token_rate)
        self.whole_word_masking = bool(whole_word_masking)
        self.max_ngram = int(max_ngram)
        self.seed = seed
        if whole_word_segmenter not in ("wordpiece", "jieba"):
            raise UsageError(
                f"whole_word_segmenter must be 'wordpiece' or 'jieba', got {whole_word_segmenter!r} (the "
                "pipelines' 'auto' is chosen from the text: chinese_words.resolve_segmenter)."
            )
        self.whole_word_segmenter = whole_word_segmenter
        if whole_word_segmenter == "jieba" and self.whole_word_masking:
            load_jieba()  # a missing segmenter is an error now, not at the first batch
        self.vocabulary, self._continuation, self._jieba = None, None, None
        if vocabulary is not None:
            self.set_vocabulary(vocabulary)

    def set_vocabulary(self, vocabulary):
        """The vocabulary (list of str or `vocab.txt` path) whole-word masking reads `##` pieces from."""
        if isinstance(vocabulary, (str, os.PathLike)):
            with open(vocabulary, encoding="utf-8") as f:
                vocabulary = [line.rstrip("\n") for line in f]
        self.vocabulary = list(vocabulary)
        self._continuation = tf.constant([t.startswith("##") for t in self.vocabulary], tf.bool)
        if self.whole_word_segmenter == "jieba" and self.whole_word_masking:
            self._jieba = JiebaWordBoundaries(self.vocabulary)

    # The vocabulary is an asset of a .keras file, not part of the config (as the tokenizer's).
    def save_assets(self, dir_path):
        if self.vocabulary is not None:
            write_text(os.path.join(dir_path, "vocab.txt"), "".join(t + "\n" for t in self.vocabulary))

    def load_assets(self, dir_path):
        if os.path.exists(os.path.join(dir_path, "vocab.txt")):
            self.set_vocabulary(os.path.join(dir_path, "vocab.txt"))

    # --- randomness -------------------------------------------------------------------------
    def _uniform(self, shape, seed, salt, dtype=tf.float32, maxval=None):
        kw = {"minval": 0, "maxval": maxval} if maxval is not None else {}
        if seed is None:
            op_seed = None if self.seed is None else self.seed + salt
            return tf.random.uniform(shape, dtype=dtype, seed=op_seed, **kw)
        seed = tf.cast(seed, tf.int64) + tf.constant([0, 7919], tf.int64) * salt
        return tf.random.stateless_uniform(shape, seed=seed, dtype=dtype, **kw)

    # --- units --------------------------------------------------------------------------
    def _word_ids(self, token_ids, candidate):
        if self._continuation is None:
            raise UsageError(
                "whole_word_masking needs word boundaries: pass `word_ids` to the call (e.g. "
                "BertTokenizer word ids) or `vocabulary=` (vocab.txt path or list) so pieces "
                "starting with '##' are joined to their word."
            )
        if self._jieba is not None:
            is_cont = tf.ensure_shape(
                tf.numpy_function(self._jieba, [token_ids, candidate], tf.bool, stateful=False), token_ids.shape
            )
        else:
            is_cont = tf.gather(self._continuation, tf.clip_by_value(token_ids, 0, len(self.vocabulary) - 1))
        starts = tf.logical_and(candidate, tf.logical_not(is_cont))
        # A continuation after a special token starts a word of its own.
        prev_candidate = tf.pad(candidate[:, :-1], [[0, 0], [1, 0]])
        starts = tf.logical_or(starts, tf.logical_and(candidate, tf.logical_not(prev_candidate)))
        word = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1
        return tf.where(candidate, word, -1)

    def _candidates(self, ids, word_ids):
        """True where a token may be chosen: not an unselectable id, and in a word (word id >= 0)."""
        candidate = tf.ones_like(ids, tf.bool)
        for special in self.unselectable_token_ids:
            candidate = tf.logical_and(candidate, tf.not_equal(ids, special))
        if word_ids is not None:
            candidate = tf.logical_and(candidate, tf.convert_to_tensor(word_ids) >= 0)
        return candidate

    def masking_units(self, token_ids, word_ids=None, seed=None):
        """Which tokens `call(token_ids, word_ids, seed)` chooses together, for inspecting a recipe.

        Args:
            token_ids: int `[batch, seq]`, packed and padded.
            word_ids: optional int `[batch, seq]` (-1 outside words), as for `call`.
            seed: as for `call`; the n-gram spans are drawn from it, so the same seed gives
                the units that call chose from.

        Returns:
            int32 `[batch, seq]`: each selectable token's unit, numbered 0.. in order along
            its row (a token; a whole word with `whole_word_masking`; a span of 1 to
            `max_ngram` words or tokens with `max_ngram > 1`); -1 for tokens never chosen
            (unselectable ids, word id -1). A unit is chosen whole or not at all.
        """
        ids = tf.cast(tf.convert_to_tensor(token_ids), tf.int32)
        return self._units(ids, word_ids, self._candidates(ids, word_ids), seed)

    def _units(self, token_ids, word_ids, candidate, seed):
        """Unit index of each candidate token (-1 elsewhere); the tokens of a unit are chosen together.

        Units are numbered in order of appearance, so every index is below `seq`.
        """
        seq = tf.shape(token_ids)[1]
        prev_candidate = tf.pad(candidate[:, :-1], [[0, 0], [1, 0]])
        if self.whole_word_masking:
            if word_ids is None:
                word_ids = self._word_ids(token_ids, candidate)
            # Renumber words 0.. in order of appearance so ids stay below `seq` even
            # when word ids of the second segment continue the first segment's.
            word_ids = tf.cast(word_ids, tf.int32)
            prev = tf.pad(word_ids[:, :-1], [[0, 0], [1, 0]], constant_values=-1)
            new_word = tf.logical_and(
                candidate, tf.logical_or(tf.not_equal(word_ids, prev), tf.logical_not(prev_candidate))
            )
        elif self.max_ngram > 1:
            new_word = candidate  # every candidate token is a unit of its own
        else:
            # One unit per token, indexed by position (non-candidates are never taken).
            return tf.where(candidate, tf.range(seq)[None, :], -1)
        words = tf.cumsum(tf.cast(new_word, tf.int32), axis=1) - 1  # 0.. over candidate words
        if self.max_ngram > 1:
            # Cut each row's words into consecutive spans whose lengths are drawn
            # uniformly from 1..max_ngram: span k covers words [ends[k-1], ends[k]).
            # `seq` draws always cover the (at most `seq`) words; only the span that
            # reaches the row's last word is cut short there.
            lengths = self._uniform(tf.shape(token_ids), seed, 3, tf.int32, self.max_ngram) + 1
            ends = tf.cumsum(lengths, axis=1)
            words = tf.searchsorted(ends, tf.maximum(words, 0), side="right")
        return tf.where(candidate, words, -1)

    @staticmethod
    def _take_in_order(size_in_order, budget):
        """Which units to take, visiting them in order: a unit is taken when it fits in
        what is left of the budget and skipped otherwise (the original's `continue`).

        Vectorised as rounds: in each round, units bigger than what is left are out for
        good (the remainder only shrinks), and the longest prefix of the others that
        fits is taken. The next unit after that prefix did not fit, so it is out in the
        next round: every round reproduces the sequential walk up to its next skip, and
        ends the loop when no row can take more. Memory is O(batch * units).
        """
        budget = tf.cast(budget, size_in_order.dtype)

        def eligible(taken, left):
            return tf.logical_and(
                tf.logical_not(taken),
                tf.logical_and(size_in_order > 0, size_in_order <= left[:, None]),
            )

        def cond(taken, left):
            return tf.reduce_any(eligible(taken, left))

        def body(taken, left):
            sizes = tf.where(eligible(taken, left), size_in_order, 0)
            take = tf.logical_and(sizes > 0, tf.cumsum(sizes, axis=1) <= left[:, None])
            left = left - tf.reduce_sum(tf.where(take, sizes, 0), axis=1)
            return tf.logical_or(taken, take), left

        taken, _ = tf.while_loop(
            cond,
            body,
            (tf.zeros_like(size_in_order, tf.bool), budget),
            maximum_iterations=tf.shape(size_in_order)[1] + 1,
        )
        return taken

    # --- call ---------------------------------------------------------------------------
    def call(self, token_ids, word_ids=None, seed=None):
        if isinstance(token_ids, tf.RaggedTensor):
            raise ArgumentTypeError(
                "MaskedLMMasker takes packed, padded token_ids (e.g. from SegmentPacker), not ragged ones."
            )
        token_ids = tf.convert_to_tensor(token_ids)
        unbatched = token_ids.shape.rank == 1
        if unbatched:
            token_ids = token_ids[None, :]
            if word_ids is not None:
                word_ids = tf.convert_to_tensor(word_ids)[None, :]
        if token_ids.shape.rank != 2:
            raise UsageError(f"token_ids must be [batch, seq] or [seq]; got rank {token_ids.shape.rank}.")
        ids = tf.cast(token_ids, tf.int32)
        batch, seq = tf.shape(ids)[0], tf.shape(ids)[1]

        candidate = self._candidates(ids, word_ids)
        num_candidates = tf.reduce_sum(tf.cast(candidate, tf.int32), axis=1)
        # The original: min(max_predictions, max(1, int(round(len * rate)))).
        budget = tf.cast(tf.round(tf.cast(num_candidates, tf.float32) * self.selection_rate), tf.int32)
        budget = tf.minimum(tf.maximum(budget, 1), self.max_predictions)
        budget = tf.minimum(budget, num_candidates)

        units = self._units(ids, word_ids, candidate, seed)
        # Candidate tokens per unit (a segment sum: O(batch * seq) memory), then units in
        # random order, each taken if it fits in what is left of the budget.
        rows = tf.range(batch)[:, None] * seq
        segments = tf.where(candidate, units + rows, batch * seq)  # non-candidates: a dummy segment
        unit_size = tf.reshape(
            tf.math.unsorted_segment_sum(tf.ones([batch * seq], tf.int32), tf.reshape(segments, [-1]), batch * seq + 1)[
                :-1
            ],
            [batch, seq],
        )  # [batch, unit]
        order = tf.argsort(self._uniform([batch, seq], seed, 1), axis=1)
        size_in_order = tf.gather(unit_size, order, batch_dims=1)
        take_in_order = self._take_in_order(size_in_order, budget)
        rank = tf.argsort(order, axis=1)  # unit -> its place in the random order
        take_unit = tf.gather(take_in_order, rank, batch_dims=1)
        chosen = tf.logical_and(tf.gather(take_unit, tf.maximum(units, 0), batch_dims=1), candidate)

        # 80% [MASK], 10% random, 10% unchanged, decided per token.
        draw = self._uniform([batch, seq], seed, 2)
        to_mask = tf.logical_and(chosen, draw < self.mask_token_rate)
        to_random = tf.logical_and(
            chosen,
            tf.logical_and(draw >= self.mask_token_rate, draw < self.mask_token_rate + self.random_token_rate),
        )
        random_ids = self._random_tokens([batch, seq], seed)
        corrupted = tf.where(to_mask, self.mask_token_id, ids)
        corrupted = tf.where(to_random, random_ids, corrupted)

        # Chosen positions, ascending, padded to max_predictions.
        key = tf.where(chosen, tf.range(seq)[None, :], seq + tf.range(seq)[None, :])
        sorted_pos = tf.sort(key, axis=1)
        sorted_pos = tf.pad(
            sorted_pos, [[0, 0], [0, tf.maximum(self.max_predictions - seq, 0)]], constant_values=2 * seq
        )[:, : self.max_predictions]
        weights = tf.cast(sorted_pos < seq, tf.float32)
        positions = tf.where(sorted_pos < seq, sorted_pos, 0)
        mask_ids = tf.gather(ids, positions, batch_dims=1) * tf.cast(weights, tf.int32)
        outputs = {
            "token_ids": tf.cast(corrupted, token_ids.dtype),
            "mask_positions": positions,
            "mask_ids": mask_ids,
            "mask_weights": weights,
        }
        if unbatched:
            outputs = {k: v[0] for k, v in outputs.items()}
        return outputs

    def _random_tokens(self, shape, seed):
        # Uniform over the vocabulary minus the unselectable ids, so a random
        # replacement is never [CLS]/[SEP]/[PAD]: draw from the remaining ids and
        # shift past each excluded id.
        excluded = sorted(set(i for i in self.unselectable_token_ids if 0 <= i < self.vocabulary_size))
        draw = self._uniform(shape, seed, 4, tf.int32, self.vocabulary_size - len(excluded))
        for e in excluded:
            draw = draw + tf.cast(draw >= e, tf.int32)
        return draw

    def compute_output_shape(self, token_ids_shape, word_ids_shape=None):
        lead = tuple(token_ids_shape[:-1])
        return {
            "token_ids": tuple(token_ids_shape),
            "mask_positions": lead + (self.max_predictions,),
            "mask_ids": lead + (self.max_predictions,),
            "mask_weights": lead + (self.max_predictions,),
        }

    def get_config(self):
        config = super().get_config()
        config.update(
            vocabulary_size=self.vocabulary_size,
            mask_token_id=self.mask_token_id,
            unselectable_token_ids=self.unselectable_token_ids,
            max_predictions=self.max_predictions,
            selection_rate=self.selection_rate,
            mask_token_rate=self.mask_token_rate,
            random_token_rate=self.random_token_rate,
            whole_word_masking=self.whole_word_masking,
            max_ngram=self.max_ngram,
            seed=self.seed,
            whole_word_segmenter=self.whole_word_segmenter,
        )
        return config
