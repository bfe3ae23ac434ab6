"""The committed notebooks are executed, honest about errors, and self-contained."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tests.conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]


def _tags(cell) -> list[str]:
    return cell.metadata.get("tags", [])


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ is empty"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_was_executed_top_to_bottom_in_one_run(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    counts = [c.execution_count for c in _code_cells(nb)]
    assert None not in counts, f"{path.name}: cells never executed -- run `make notebooks`"
    assert counts == list(range(1, len(counts) + 1)), (
        f"{path.name}: execution counts {counts} show cells run out of order or re-run; run `make notebooks`"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_errors_appear_only_where_announced(path):
    nb = nbformat.read(path, as_version=4)
    for cell in _code_cells(nb):
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        if "raises-exception" in _tags(cell):
            assert errors, f"{path.name}: cell tagged raises-exception did not raise:\n{cell.source}"
        else:
            assert not errors, f"{path.name}: unexpected error in cell:\n{cell.source}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_gpu_cells_say_why_they_did_not_run_on_a_cpu_execution(path):
    from tools.execute_notebooks import GPU_NOT_RUN

    nb = nbformat.read(path, as_version=4)
    if nb.metadata.get("viewlab", {}).get("cuda"):
        pytest.skip("this copy was executed on CUDA")
    for cell in _code_cells(nb):
        if "gpu" in _tags(cell):
            assert GPU_NOT_RUN not in cell.source, f"{path.name}: a gpu cell's source was replaced by the stand-in"
            text = "".join(o.get("text", "") for o in cell.get("outputs", []))
            assert text.strip() == GPU_NOT_RUN, f"{path.name}: gpu cell without the not-run note:\n{cell.source}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_gpu_cells_are_marked_for_varying_output(path):
    nb = nbformat.read(path, as_version=4)
    for cell in _code_cells(nb):
        if "gpu" in _tags(cell):
            assert "nbval-ignore-output" in _tags(cell), (
                f"{path.name}: a gpu cell's output depends on the GPU model; tag it nbval-ignore-output "
                f"and assert what must hold inside the cell:\n{cell.source}"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_never_reads_the_source_articles(path):
    text = path.read_text()
    assert "shared/seeds" not in text and "../shared" not in text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_opens_with_title_and_objectives(path):
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "markdown")
    assert first.source.lstrip().startswith("# "), f"{path.name}: first markdown cell needs a '# ' title"
    assert "objectives" in "".join(c.source for c in nb.cells[:4] if c.cell_type == "markdown").lower()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_image_output_has_alt_text(path):
    nb = nbformat.read(path, as_version=4)
    for cell in _code_cells(nb):
        for out in cell.get("outputs", []):
            if "image/png" in out.get("data", {}):
                alt = out.get("metadata", {}).get("image/png", {}).get("alt") or out.get("metadata", {}).get("alt")
                assert alt, f"{path.name}: figure without alt text (use viewlab.show_figure):\n{cell.source}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_stored_output_names_this_checkout(path):
    """Outputs are compared on every machine: an absolute path of the checkout (a warning's file name, say)
    differs in every clone and fails strict nbval there."""
    root = str(ROOT)
    nb = nbformat.read(path, as_version=4)
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            text = out.get("text", "") + "".join(
                str(v) for k, v in out.get("data", {}).items() if k.startswith("text/")
            )
            assert root not in text, f"{path.name} cell {index} stores a path of this checkout: {text[:300]}"


# --- One sitting per notebook ----------------------------------------------------------------------------------
# A main notebook (01-06) is a lecture of about 45 minutes: at most 60 cells, and its objectives state the
# reading time, which must agree with the estimate below within 5 minutes (slack, so an edit of a few cells
# does not force a new number; the cell count is not stated, the test counts it). The estimate is deliberately
# simple so an author can check it by hand: 200 words of prose a minute, 10 lines of code a minute, and a
# quarter of a minute to run each code cell and read what it printed. Appendices (07 on) state it too but
# have no budget.
MAIN_NOTEBOOK_CELL_BUDGET = 60
MAIN_NOTEBOOK_MINUTES_BUDGET = 50
TIME_LINE = re.compile(r"\*\*Time:\*\* about (\d+) minutes")


def reading_minutes(nb) -> float:
    words = sum(len(re.findall(r"\w+", c.source)) for c in nb.cells if c.cell_type == "markdown")
    code = [c for c in nb.cells if c.cell_type == "code"]
    lines = sum(len(c.source.splitlines()) for c in code)
    return words / 200 + lines / 10 + len(code) / 4


def _is_main(path: Path) -> bool:
    return int(path.name[:2]) <= 6


def test_reading_time_estimate_counts_prose_code_and_cells():
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("word " * 400), nbformat.v4.new_code_cell("x = 1\n" * 20)]
    )
    assert reading_minutes(nb) == 2 + 2 + 0.25


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_states_its_reading_time_and_fits_one_sitting(path):
    nb = nbformat.read(path, as_version=4)
    head = "".join(c.source for c in nb.cells[:4] if c.cell_type == "markdown")
    found = TIME_LINE.search(head)
    assert found, f"{path.name}: state '**Time:** about N minutes' under the objectives"
    minutes = int(found[1])
    estimate = reading_minutes(nb)
    assert abs(minutes - estimate) <= 5, f"{path.name}: says about {minutes} minutes, the estimate is {estimate:.0f}"
    if _is_main(path):
        assert len(nb.cells) <= MAIN_NOTEBOOK_CELL_BUDGET, (
            f"{path.name}: {len(nb.cells)} cells; a main notebook has at most {MAIN_NOTEBOOK_CELL_BUDGET} "
            "(move tangents to the appendix)"
        )
        assert estimate <= MAIN_NOTEBOOK_MINUTES_BUDGET, f"{path.name}: about {estimate:.0f} minutes, over one sitting"


# --- Links between notebooks -------------------------------------------------------------------------------------
# A notebook points at another one as "notebook 03, section 5 (*Writing into an expanded tensor*)": the number
# for the reader, the title so a renumbered or renamed section fails here instead of sending the reader to
# the wrong place.
# "Notebook 08, section 3 (...)" at the start of a sentence is a link too.
SECTION_LINK = re.compile(r"notebook\s+(\d\d),\s+section\s+(\w+)(\s+\(\*([^*]+)\*)?", re.IGNORECASE)
HEADING_NUMBER = re.compile(r"#+ (\w+)\s*[.·]\s*(.*)")


def _sections(number: str) -> dict[str, str]:
    (path,) = [p for p in NOTEBOOKS if p.name.startswith(number)]
    nb = nbformat.read(path, as_version=4)
    heads = (line for c in nb.cells if c.cell_type == "markdown" for line in c.source.splitlines())
    return {m[1]: m[2] for m in map(HEADING_NUMBER.match, heads) if m}


def test_section_links_are_checked_against_titles():
    assert SECTION_LINK.search("notebook 03, section 5 (*Writing*)")[4] == "Writing"
    assert SECTION_LINK.search("notebook 01, section 8 (*Five real mistakes*, Mistake 2)")[4] == "Five real mistakes"
    assert SECTION_LINK.search("in notebook 04,\nsection 6a.")[2] == "6a"  # a line break does not hide a link
    assert SECTION_LINK.search("see notebook 03, section 5.")[3] is None
    assert SECTION_LINK.search("notebook 10, section 2 (*Memory per module*)")[1] == "10"  # two digits, 10 on


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_links_to_other_notebooks_name_a_section_that_has_that_title(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for link in SECTION_LINK.finditer(cell.source):
            number, section = link[1], link[2]
            title = " ".join(link[4].split()) if link[4] else None  # a line break in markdown reads as a space
            assert title, f"{path.name}: '{link[0]}' needs the section's title: '{link[0]} (*Title*)'"
            sections = _sections(number)
            assert section in sections, f"{path.name}: notebook {number} has no section {section}: {sections}"
            assert sections[section].startswith(title), (
                f"{path.name}: notebook {number}, section {section} is '{sections[section]}', not '{title}'"
            )


def test_readme_states_each_notebooks_time_as_the_notebook_does():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        head = "".join(c.source for c in nbformat.read(path, as_version=4).cells[:4] if c.cell_type == "markdown")
        minutes = TIME_LINE.search(head)[1]
        row = next((line for line in readme.splitlines() if f"(notebooks/{path.name})" in line), None)
        assert row, f"README.md has no row for {path.name}"
        assert f"| {minutes} min |" in row, f"README.md: {path.name} takes about {minutes} minutes; its row says {row}"
