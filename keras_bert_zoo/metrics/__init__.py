"""Scores in numpy (and in TensorFlow where a SavedModel computes them): one module per kind of metric."""

__all__ = []  # nothing re-exported: import from the modules
