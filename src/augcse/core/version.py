"""The package's version, stated once: ``pyproject.toml`` reads it, ``augcse.__version__`` and eval records show it."""

__version__ = "0.1.0"
