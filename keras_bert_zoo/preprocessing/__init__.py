"""Text in, model inputs out: WordPiece tokenizer, segment packer, preprocessor, vocabulary learning."""

from keras_bert_zoo.preprocessing.packer import SegmentPacker
from keras_bert_zoo.preprocessing.preprocessor import BertPreprocessor
from keras_bert_zoo.preprocessing.tokenizer import BertTokenizer
from keras_bert_zoo.preprocessing.vocabulary import learn_vocabulary

__all__ = ["BertTokenizer", "SegmentPacker", "BertPreprocessor", "learn_vocabulary"]
