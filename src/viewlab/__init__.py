"""viewlab: the toolbox of the course on PyTorch tensor memory.

Where a tensor lives (:func:`layout`, :func:`storage_indices`, :func:`shares_storage`), why shapes
broadcast (:func:`explain_broadcast`), which operators return views (:func:`view_op_table`), how
many bytes code allocates (:func:`measure`, :class:`MemoryMonitor`), guards that catch copies and
accidental broadcasts (:func:`views_only`, :func:`watch_broadcasts`), what IPython keeps alive
(:func:`held_by_ipython`), pictures of all of it (:func:`draw_layout`, :func:`draw_broadcast`) and a
stride explorer to edit a layout and watch which storage elements it reads (:func:`explore`).
More lives in submodules: ``viewlab.attention`` (masks and attention built by broadcasting, imported
when first used); ``viewlab.viewops.OFFICIAL_VIEW_OPS`` is the docs' list of view ops. The course's own
exercises, claims, timing method (``viewlab.course.bench``: candidates timed side by side, as ratios)
and torch floor (``viewlab.course.versions``: the behaviours that changed between torch releases which
the notebooks rely on) are in ``viewlab.course``, which ``import viewlab`` never loads.

Importing viewlab starts nothing: no CUDA initialisation, no threads, no pyplot state.

>>> import torch, viewlab
>>> viewlab.shares_storage(torch.zeros(1, 3).expand(4, 3), torch.zeros(3))
False
>>> viewlab.attention.causal_mask(2).tolist()
[[True, False], [True, True]]
"""

import importlib as _importlib

from .broadcast import BroadcastExplanation, explain_broadcast
from .draw import draw_broadcast, draw_layout, show_figure
from .errors import BroadcastError, BroadcastStretchError, BroadcastWarning, CopyError
from .ipython import held_by_ipython, release_ipython_refs
from .layout import Layout, layout, shares_storage, storage_indices
from .memory import Measurement, OpRecord, measure
from .monitor import MemoryMonitor, load_ipython_extension, unload_ipython_extension  # noqa: F401 - %load_ext viewlab finds them
from .sentinels import views_only, watch_broadcasts
from .viewops import OP_CASES, observe, view_op_table

__all__ = [
    # where a tensor lives
    "layout",
    "Layout",
    "storage_indices",
    "shares_storage",
    # broadcasting and views
    "explain_broadcast",
    "BroadcastExplanation",
    "view_op_table",
    "observe",
    "OP_CASES",
    # memory
    "measure",
    "Measurement",
    "OpRecord",
    "MemoryMonitor",
    # guards and IPython
    "views_only",
    "watch_broadcasts",
    "held_by_ipython",
    "release_ipython_refs",
    # pictures
    "draw_layout",
    "draw_broadcast",
    "show_figure",
    "explore",
    # what can be caught
    "BroadcastError",
    "CopyError",
    "BroadcastWarning",
    "BroadcastStretchError",
]
__version__ = "0.1.0"

# Reached as attributes, imported on first use: `import viewlab` stays light and a learner still writes
# `viewlab.attention.causal_mask(...)`.
_SUBMODULES = ("attention",)


def __getattr__(name: str):  # noqa: ANN202 - a module attribute hook
    if name in _SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    if name == "explore":  # anywidget is loaded only by the first explorer
        globals()[name] = _importlib.import_module(f"{__name__}.explorer").explore
        return globals()[name]
    raise AttributeError(f"module 'viewlab' has no attribute {name!r}")
