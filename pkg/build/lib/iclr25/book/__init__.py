"""The book machinery: chapter registry (``_toc.yml``), papermill runner with cache, book build,
golden notebooks, the claims table, and the CLI (``python -m iclr25``).

Chapters only need :class:`Claim`, :func:`report_claims` and :func:`below`.
"""

from iclr25.book.claims import CLAIMS_MIME, KINDS, Claim, below, report_claims

__all__ = ["CLAIMS_MIME", "KINDS", "Claim", "below", "report_claims"]
