"""viewlab: small helpers for the course on PyTorch tensor memory.

Importing viewlab starts nothing: no CUDA initialisation, no threads, no pyplot state.

>>> import torch, viewlab
>>> viewlab.shares_storage(torch.zeros(1, 3).expand(4, 3), torch.zeros(3))
False
"""

from .draw import draw_layout, show_figure
from .layout import Layout, layout, storage_indices
from .sharing import shares_storage
from .viewops import OP_CASES, OFFICIAL_VIEW_OPS, observe, view_op_table

__all__ = [
    "Layout",
    "layout",
    "storage_indices",
    "shares_storage",
    "draw_layout",
    "show_figure",
    "OP_CASES",
    "OFFICIAL_VIEW_OPS",
    "observe",
    "view_op_table",
]
__version__ = "0.1.0"
