"""The ``soma`` command line: one module per subcommand, every argument check in ``args``."""
