"""Subcommands of the ``dpcount`` command line (see :mod:`dpcount.cli`)."""
