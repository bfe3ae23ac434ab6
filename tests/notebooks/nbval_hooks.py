"""pytest plugin for the notebook run: ``pytest -p tests.notebooks.nbval_hooks --nbval notebooks/``.

nbval has no conditional skip of its own. Cells tagged ``gpu`` need a CUDA device; without one they
are skipped with a visible reason (pytest -ra lists it) instead of failing or silently passing.
"""

from __future__ import annotations

import pytest

GPU_TAG = "gpu"


def _cuda_available() -> bool:
    import torch  # imported here, not at module load, so collecting plain tests stays cheap

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [i for i in items if GPU_TAG in (getattr(i, "cell", None) or {}).get("metadata", {}).get("tags", [])]
    if not gpu_items or _cuda_available():
        return
    marker = pytest.mark.skip(reason="cell tagged 'gpu' needs CUDA; torch.cuda.is_available() is False here")
    for item in gpu_items:
        item.add_marker(marker)
