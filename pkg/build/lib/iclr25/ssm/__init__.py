"""iclr25.ssm: selective state-space models (Mamba) in plain torch.

>>> y, h = selective_scan(x, delta, A, B, C, D, mode="chunked")     # == mode="sequential"
>>> model = TinyMamba(MambaConfig(n_layers=4))                       # byte-level LM
>>> logits = model(ids)                                              # (b, l, 256)
"""

from iclr25.ssm.mamba import MambaBlock, MambaConfig, MambaMixer, TinyMamba
from iclr25.ssm.scan import (selective_scan, selective_scan_chunked, selective_scan_sequential,
                             selective_scan_step)

__all__ = ["MambaBlock", "MambaConfig", "MambaMixer", "TinyMamba", "selective_scan",
           "selective_scan_chunked", "selective_scan_sequential", "selective_scan_step"]
