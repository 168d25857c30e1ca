"""One module per `bert-zoo` verb: `add_arguments(parser)` and `run(args) -> int`."""
