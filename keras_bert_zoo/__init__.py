"""keras-bert-zoo: BERT end to end in Keras 3.

The public names below are resolved on first use (PEP 562 `__getattr__`), and a plain
`import keras_bert_zoo` in a user's script imports them all at once, as before: that
registers every Keras class (so `keras.saving.load_model` finds a `.keras` file's
`BertClassifier`), the checkpoint formats and `compile(optimizer="auto")`. Only the
`bert-zoo` command skips that step: its parser is built without TensorFlow (15-20 s of
start-up on a busy 2-core machine) and each verb imports what it runs (`keras_bert_zoo.cli`).
Past `import keras`, importing the package itself costs a fraction of a second.
"""

import os as _os
import sys as _sys

__version__ = "0.1.0"

__all__ = [
    "BertBackbone",
    "BertClassifier",
    "BertPretrainer",
    "BertTagger",
    "BertSpanQA",
    "BertMultipleChoice",
    "BertSentenceEmbedder",
    "BertFeatureExtractor",
    "presets",
    "BertTokenizer",
    "SegmentPacker",
    "BertPreprocessor",
    "TaggingPreprocessor",
    "SpanQAPreprocessor",
    "MultipleChoicePreprocessor",
    "learn_vocabulary",
    "batch_raw",
    "MaskedLMMasker",
    "masked_lm_dataset",
    "export_saved_model",
    "finetune",
    "pretrain",
    "continue_pretraining",
    "import_all",
]


def import_all():
    """Imports every public name and registers every Keras class and checkpoint format.

    A plain `import keras_bert_zoo` does this already; the `bert-zoo` command calls it
    before a verb runs, so the verb sees the package as a script does.

    Examples:
    >>> import keras_bert_zoo
    >>> keras_bert_zoo.import_all()
    >>> keras_bert_zoo.BertClassifier.__name__
    'BertClassifier'
    """
    from keras_bert_zoo import convert, training  # noqa: F401  register the checkpoint formats; optimizer="auto"
    from keras_bert_zoo.export.saved_model import export_saved_model
    from keras_bert_zoo.models.backbone import BertBackbone
    from keras_bert_zoo.models.feature_extractor import BertFeatureExtractor
    from keras_bert_zoo.preprocessing import BertPreprocessor, BertTokenizer, SegmentPacker, learn_vocabulary
    from keras_bert_zoo.preprocessing.batching import batch_raw
    from keras_bert_zoo.preprocessing.masker import MaskedLMMasker
    from keras_bert_zoo.tasks.classifier.model import BertClassifier
    from keras_bert_zoo.tasks.embedder.model import BertSentenceEmbedder
    from keras_bert_zoo.tasks.finetuning import finetune
    from keras_bert_zoo.tasks.multiple_choice.model import BertMultipleChoice
    from keras_bert_zoo.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor
    from keras_bert_zoo.tasks.pretrainer.adaptation import continue_pretraining
    from keras_bert_zoo.tasks.pretrainer.data import masked_lm_dataset
    from keras_bert_zoo.tasks.pretrainer.job import pretrain
    from keras_bert_zoo.tasks.pretrainer.model import BertPretrainer
    from keras_bert_zoo.tasks.span_qa.model import BertSpanQA
    from keras_bert_zoo.tasks.span_qa.preprocessor import SpanQAPreprocessor
    from keras_bert_zoo.tasks.tagger.model import BertTagger
    from keras_bert_zoo.tasks.tagger.preprocessor import TaggingPreprocessor

    globals().update({name: value for name, value in locals().items() if name in __all__})


def __getattr__(name):  # PEP 562: called only for names not imported yet
    if name not in __all__:
        raise AttributeError(f"module 'keras_bert_zoo' has no attribute {name!r}")
    import_all()
    return globals()[name]


def __dir__():
    return sorted(set(globals()) | set(__all__))


def presets():
    """Names of the built-in architectures (`bert_tiny_uncased`, ...)."""
    from keras_bert_zoo.models.presets import BACKBONE_PRESETS

    return sorted(BACKBONE_PRESETS)


def _started_as_command():
    """True when this process is the `bert-zoo` command (its console script, or
    `python -m keras_bert_zoo.cli`), which imports this package before its `main()`."""
    script = _os.path.basename(_sys.argv[0]) if _sys.argv else ""
    # pip's launchers: `bert-zoo`, `bert-zoo.exe`, `bert-zoo-script.py` (the script strips these after import)
    if script in ("bert-zoo", "bert-zoo.exe", "bert-zoo-script.py", "bert-zoo-script.pyw"):
        return True
    argv = getattr(_sys, "orig_argv", [])
    # Consecutive pairs: argv[1:] is one shorter, its last item pairs with nothing.
    return any(a == "-m" and b == "keras_bert_zoo.cli" for a, b in zip(argv, argv[1:], strict=False))


if _started_as_command():
    # TensorFlow's C++ start-up lines must be filtered before it loads (keras_bert_zoo.quiet).
    # Library users keep TensorFlow's defaults.
    from keras_bert_zoo.quiet import quiet_command_line

    quiet_command_line()
else:
    import_all()
