"""iclr25: the reusable kernels of *ICLR 2025 in Code*, an executable book.

Subpackages group code by what it is (``sampling``, ``graphs``, ``risk`` ...), not by paper.
``iclr25.book`` holds the chapter registry, the papermill runner, the book build and the CLI
(``python -m iclr25``).
"""

__version__ = "0.1.0"
