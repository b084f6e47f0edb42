"""``python -m iclr25``: the book's command line (see ``iclr25.book.cli``)."""

from iclr25.book.cli import main

if __name__ == "__main__":  # not when imported (autosummary imports every module of the package)
    raise SystemExit(main())
