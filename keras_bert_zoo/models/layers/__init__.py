"""The backbone's layers, named like the checkpoint weights they hold."""

__all__ = []  # nothing re-exported: import from the modules
