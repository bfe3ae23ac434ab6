"""Re-execute notebooks in place so their stored outputs are fresh (``make notebooks``).

Seeded and deterministic: PYTHONHASHSEED is fixed and each notebook seeds torch itself. Cells tagged
``raises-exception`` may raise (their traceback is the lesson). Cells tagged ``gpu`` run only when
CUDA is available; otherwise the kernel prints GPU_NOT_RUN in their place, so the stored notebook (and
the book) says plainly that the cell was not run, and why, instead of showing nothing.

Usage: python tools/execute_notebooks.py [--out-dir DIR] notebooks/01_views_and_copies.ipynb [...]
       python tools/execute_notebooks.py notebooks          (a folder: all its notebooks, sorted)

``--out-dir DIR`` writes the executed copies into DIR and leaves the notebooks untouched (cells still run
in the notebook's own folder, so relative paths keep working); ``make test-colab`` uses it.
``--cuda-peaks FILE`` (on a machine with a CUDA GPU) writes each notebook's peak GPU memory to FILE as JSON,
read in the notebook's own kernel after its last cell, with peaks erased by viewlab's resets counted back in.
A notebook that fails is reported and the others still run; the exit status is 1 if any failed.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def execution_stamp(cuda: bool) -> dict:
    """What ran the notebook, stored in its metadata under "viewlab" (the book stamps it on each page).

    No dates or host names: re-running on the same setup leaves the file unchanged.
    """
    import torch

    return {
        "torch_version": torch.__version__.split("+")[0],
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "cuda": cuda,
    }


GPU_NOT_RUN = (
    "Not run here: this cell needs a CUDA GPU, and this copy of the notebook was executed on a machine "
    "without one (torch.cuda.is_available() was False). On Colab: Runtime > Change runtime type > GPU, "
    "then run it."
)


def tidy_outputs(cell: dict, replacements: dict[str, str]) -> None:
    """Make stored outputs independent of machine load and install location.

    - Consecutive stream outputs of the same name are merged: a busy machine can split one print()
      into several messages, which would churn the file between runs.
    - Absolute paths in tracebacks (this checkout, the venv) are shortened, so the stored error
      reads the same on every machine.
    """
    merged: list = []
    for out in cell.get("outputs", []):
        if (
            merged
            and out.output_type == "stream"
            and merged[-1].output_type == "stream"
            and merged[-1].name == out.name
        ):
            merged[-1].text += out.text
            continue
        if out.output_type == "error":
            lines = []
            for line in out.traceback:
                for old, new in replacements.items():
                    line = line.replace(old, new)
                lines.append(line)
            out.traceback = lines
        merged.append(out)
    cell.outputs = merged


PEAK_PROBE = (
    "import json as _json, torch as _torch\n"
    "from viewlab.memory import cuda_process_peak as _peak\n"
    "print('VIEWLAB_CUDA_PEAK', _json.dumps(_peak() if _torch.cuda.is_initialized() else None))"
)


def _read_cuda_peak(client: NotebookClient, nb: nbformat.NotebookNode) -> dict | None:
    """Run PEAK_PROBE as an extra last cell (removed again) and parse what it printed."""
    import json

    probe = nbformat.v4.new_code_cell(PEAK_PROBE)
    nb.cells.append(probe)
    try:
        client.execute_cell(probe, len(nb.cells) - 1)
    finally:
        nb.cells.pop()
    for out in probe.outputs:
        for line in out.get("text", "").splitlines():
            if line.startswith("VIEWLAB_CUDA_PEAK "):
                return json.loads(line.split(" ", 1)[1])
    return None


def execute(path: Path, cuda: bool, out_dir: Path | None = None, peaks: dict | None = None) -> float:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=900, kernel_name="python3", record_timing=False, resources={"metadata": {"path": str(path.parent)}}
    )
    start = time.perf_counter()
    skipped = 0
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            if "gpu" in cell.metadata.get("tags", []) and not cuda:
                skipped += 1
                stand_in = nbformat.v4.new_code_cell(f"print({GPU_NOT_RUN!r})")
                client.execute_cell(stand_in, index)
                nb.cells[index] = cell  # nbclient stores the executed cell at `index`: put the real one back
                cell.outputs, cell.execution_count = stand_in.outputs, stand_in.execution_count
                continue
            client.execute_cell(cell, index)
            tidy_outputs(cell, _path_replacements())
        if peaks is not None:  # None where CUDA was never used
            peaks[path.name] = _read_cuda_peak(client, nb)
    nb.metadata["viewlab"] = execution_stamp(cuda)
    target = path if out_dir is None else out_dir / path.name
    nbformat.write(nb, target)
    seconds = time.perf_counter() - start
    note = f", {skipped} gpu cell(s) marked 'not run here' (no CUDA)" if skipped else ""
    print(f"executed {path} in {seconds:.1f} s{note}" + ("" if out_dir is None else f" -> {target}"))
    return seconds


def _path_replacements() -> dict[str, str]:
    import sysconfig

    root = str(Path(__file__).resolve().parents[1])
    # Longest first: site-packages lives inside the venv, which lives inside the checkout.
    pairs = {sysconfig.get_paths()["purelib"]: "<site-packages>", sys.prefix: "<venv>", root: "<course>"}
    return dict(sorted(pairs.items(), key=lambda kv: -len(kv[0])))


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    os.environ.setdefault("PYTHONHASHSEED", "0")
    import torch

    out_dir = peaks_file = None
    while argv and argv[0] in ("--out-dir", "--cuda-peaks"):
        if len(argv) < 3:
            print(__doc__)
            return 2
        if argv[0] == "--out-dir":
            out_dir = Path(argv[1])
            out_dir.mkdir(parents=True, exist_ok=True)
        else:
            peaks_file = Path(argv[1])
        argv = argv[2:]
    cuda = torch.cuda.is_available()
    peaks: dict | None = {} if peaks_file is not None else None
    failed = []
    # A folder stands for its notebooks, sorted (shells without globbing, e.g. Windows' cmd: `notebooks`).
    names = [str(nb) for arg in argv for nb in (sorted(Path(arg).glob("*.ipynb")) if Path(arg).is_dir() else [arg])]
    for name in names:
        try:
            execute(Path(name), cuda, out_dir, peaks)
        except Exception as exc:
            print(f"FAILED {name}: {type(exc).__name__}: {exc}")
            failed.append(name)
    if peaks_file is not None:
        import json

        peaks_file.write_text(json.dumps(peaks, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
