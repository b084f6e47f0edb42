"""The book machinery: chapter registry (``_toc.yml``), papermill runner with cache, book build,
golden notebooks, the claims table, and the CLI (``python -m iclr25``).

Chapters only need :class:`Claim` and :func:`report_claims`.
"""

from iclr25.book.claims import CLAIMS_MIME, Claim, report_claims

__all__ = ["CLAIMS_MIME", "Claim", "report_claims"]
