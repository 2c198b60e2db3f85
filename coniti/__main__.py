"""``python -m coniti``: the same as the ``coniti`` command."""

from coniti.cli import main

raise SystemExit(main())
