"""keras-bert-zoo: BERT end to end in Keras 3."""

import os as _os
import sys as _sys

if _sys.argv and _os.path.basename(_sys.argv[0]) == "bert-zoo":
    # The `bert-zoo` console script imports this package before its main() runs, and
    # the imports below load TensorFlow, whose C++ start-up lines must be filtered
    # before that. Library users keep TensorFlow's defaults.
    from keras_bert_zoo.quiet import quiet_command_line

    quiet_command_line()

from keras_bert_zoo import convert as _convert  # noqa: E402,F401  registers the checkpoint formats with models.loading
from keras_bert_zoo import training as _training  # noqa: E402,F401  registers compile(optimizer="auto")'s optimizer
from keras_bert_zoo.export.saved_model import export_saved_model  # noqa: E402
from keras_bert_zoo.models.backbone import BertBackbone  # noqa: E402
from keras_bert_zoo.models.classifier import BertClassifier  # noqa: E402
from keras_bert_zoo.models.multiple_choice import BertMultipleChoice  # noqa: E402
from keras_bert_zoo.models.embedder import BertSentenceEmbedder  # noqa: E402
from keras_bert_zoo.models.feature_extractor import BertFeatureExtractor  # noqa: E402
from keras_bert_zoo.models.presets import BACKBONE_PRESETS  # noqa: E402
from keras_bert_zoo.models.pretrainer import BertPretrainer  # noqa: E402
from keras_bert_zoo.models.span_qa import BertSpanQA  # noqa: E402
from keras_bert_zoo.models.tagger import BertTagger  # noqa: E402
from keras_bert_zoo.preprocessing import BertPreprocessor, BertTokenizer, SegmentPacker, learn_vocabulary  # noqa: E402
from keras_bert_zoo.preprocessing.batching import batch_raw  # noqa: E402
from keras_bert_zoo.preprocessing.choice import MultipleChoicePreprocessor  # noqa: E402
from keras_bert_zoo.preprocessing.masker import MaskedLMMasker  # noqa: E402
from keras_bert_zoo.preprocessing.pretraining_data import masked_lm_dataset  # noqa: E402
from keras_bert_zoo.preprocessing.squad import SpanQAPreprocessor  # noqa: E402
from keras_bert_zoo.preprocessing.tagging_preprocessor import TaggingPreprocessor  # noqa: E402
from keras_bert_zoo.tasks.finetuning import finetune  # noqa: E402
from keras_bert_zoo.tasks.pretraining import pretrain  # noqa: E402
from keras_bert_zoo.training.adaptation import continue_pretraining  # noqa: E402

__version__ = "0.1.0"


def presets():
    """Names of the built-in architectures (`bert_tiny_uncased`, ...)."""
    return sorted(BACKBONE_PRESETS)


__all__ = ["BertBackbone", "BertClassifier", "BertPretrainer", "BertTagger", "BertSpanQA", "BertMultipleChoice",
           "BertSentenceEmbedder", "BertFeatureExtractor", "presets", "BertTokenizer", "SegmentPacker",
           "BertPreprocessor", "TaggingPreprocessor", "SpanQAPreprocessor", "MultipleChoicePreprocessor",
           "learn_vocabulary", "batch_raw", "MaskedLMMasker", "masked_lm_dataset", "export_saved_model", "finetune",
           "pretrain", "continue_pretraining"]
