"""The ``augcse`` command line: :mod:`~augcse.commands.main` dispatches, one module per sub-command.

The top layer: a command module may import any layer; nothing imports a command module. Each imports
nothing heavy at module level, so ``augcse COMMAND --help`` answers at once.
"""
