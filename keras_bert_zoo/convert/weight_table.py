"""Moved to `keras_bert_zoo.models.weight_names` (the models own their name table).

Kept as a re-export for code that imported it from here.
"""

from keras_bert_zoo.models.weight_names import (  # noqa: F401
    WeightSpec,
    backbone_weight_specs,
    google_name,
    head_dense_specs,
)
