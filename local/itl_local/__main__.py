"""``python -m itl_local`` = ``itl-local``."""

from itl_local.cli import main

raise SystemExit(main())
