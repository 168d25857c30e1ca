"""keras-bert-zoo: BERT end to end in Keras 3."""

from keras_bert_zoo import convert as _convert  # noqa: F401  registers the checkpoint formats with models.loading
from keras_bert_zoo.export.saved_model import export_saved_model
from keras_bert_zoo.models.backbone import BertBackbone
from keras_bert_zoo.models.classifier import BertClassifier
from keras_bert_zoo.models.presets import BACKBONE_PRESETS
from keras_bert_zoo.models.pretrainer import BertPretrainer
from keras_bert_zoo.preprocessing import BertPreprocessor, BertTokenizer, SegmentPacker, learn_vocabulary
from keras_bert_zoo.preprocessing.masker import MaskedLMMasker

__version__ = "0.1.0"


def presets():
    """Names of the built-in architectures (`bert_tiny_uncased`, ...)."""
    return sorted(BACKBONE_PRESETS)


__all__ = ["BertBackbone", "BertClassifier", "presets", "BertTokenizer", "SegmentPacker", "BertPreprocessor", "learn_vocabulary", "BertPretrainer", "MaskedLMMasker", "export_saved_model"]
