"""``python -m augcse COMMAND …`` (and ``torchrun … -m augcse train …``): the ``augcse`` command."""

import sys

from augcse.commands.main import main

sys.exit(main())
