"""Alignment and safety training of language models; import from the modules (e.g.
:mod:`iclr25.align.booster`, :mod:`iclr25.align.dpo` for DPO and weak-teacher feedback)."""
