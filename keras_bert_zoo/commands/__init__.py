"""One module per `bert-zoo` verb: `add_arguments(parser)` and `run(args) -> int`."""

__all__ = []  # nothing re-exported: import from the modules
