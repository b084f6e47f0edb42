"""``python -m iclr25``: the book's command line (see ``iclr25.book.cli``)."""

from iclr25.book.cli import main

raise SystemExit(main())
