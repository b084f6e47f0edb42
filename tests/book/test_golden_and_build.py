"""Golden notebooks (make, freshness) and the book staging with its generated pages."""

from pathlib import Path

import nbformat

from iclr25.book.build import scoreboard_table, stage
from iclr25.book.claims import CLAIMS_MIME, notebook_claims
import pytest

from iclr25.book.golden import check_fresh, checked_outputs, golden_path, make_golden
from iclr25.book.registry import chapters, get_chapter


def test_golden_is_the_launch_notebook_with_the_ci_outputs(mini_book: Path) -> None:
    ch = get_chapter("demo/ok")
    assert "no golden notebook" in check_fresh(ch)
    path = make_golden(ch)
    assert path == golden_path(ch) and path.is_file()
    assert check_fresh(ch) is None
    nb = nbformat.read(path, as_version=4)
    assert "install" in nb.cells[0].metadata.get("tags", []) and "google.colab" in nb.cells[0].source
    assert [c.metadata.get("tags") for c in nb.cells if c.cell_type == "code"][1:3] == [
        ["parameters"], ["injected-parameters"]]  # papermill's cell follows the parameters cell
    assert not any("```{code-cell}" in c.source for c in nb.cells)  # plain Markdown, no MyST
    assert "iclr25" not in nb.metadata  # the run's cache metadata stays out of the golden
    assert checked_outputs(nb) == [["6\n"]]
    # an execution of the same code compares equal to the golden; a changed output does not
    from iclr25.book.golden import NO_GPU, compare_with_golden
    from iclr25.book.runner import run_chapter

    res = run_chapter(ch, scale="ci", progress=False, env=NO_GPU)
    assert res.cached  # make_golden ran exactly this
    assert compare_with_golden(ch, res.notebook) is None
    run_nb = nbformat.read(res.notebook, as_version=4)
    run_nb.cells[-1].outputs[0]["text"] = "7\n"
    changed = res.notebook.with_name("changed.ipynb")
    nbformat.write(run_nb, changed)
    msg = compare_with_golden(ch, changed)
    assert msg and "-6" in msg and "+7" in msg
    ch.path.write_text(ch.path.read_text().replace("x = n * 2", "x = n * 4"))
    msg = check_fresh(ch)
    assert msg and "python -m iclr25 golden demo/ok" in msg


def test_a_golden_without_checked_cells_compares_nothing_and_fails(mini_book: Path) -> None:
    from iclr25.book.golden import compare_with_golden

    ch = get_chapter("demo/ok")
    path = make_golden(ch)
    nb = nbformat.read(path, as_version=4)
    for c in nb.cells:
        c.metadata["tags"] = [t for t in c.metadata.get("tags", []) if t != "nbval-check-output"]
    nbformat.write(nb, path)
    assert "no cell tagged" in check_fresh(ch)
    assert "nothing to compare" in compare_with_golden(ch, path)


def test_launch_with_outputs_refuses_other_code() -> None:
    from iclr25.book.golden import launch_with_outputs

    launch = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("install", metadata={"tags": ["install"]}),
                                             nbformat.v4.new_code_cell("x = 1")])
    done = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 2")])
    with pytest.raises(ValueError, match="differs"):
        launch_with_outputs(launch, done, "a/b")


def _fake_executed(root: Path, cid: str, rows: list[dict]) -> Path:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("report_claims(...)")
    cell.outputs = [nbformat.v4.new_output("display_data", data={
        "text/plain": "table", CLAIMS_MIME: {"chapter": cid, "scale": "ci", "rows": rows}})]
    nb.cells.append(cell)
    path = root / "_build" / "fake" / f"{cid}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def test_stage_fills_scoreboard_and_chapter_table(mini_book: Path) -> None:
    (mini_book / "_config.yml").write_text("title: t\n")
    (mini_book / "book" / "intro.md").write_text("# Intro\n<!-- generated: chapter table -->\n")
    (mini_book / "book" / "scoreboard.md").write_text("# Board\n<!-- generated: scoreboard -->\n")
    row = {"claim": "c1", "paper": "p1", "measured": "m1", "holds": True, "kind": "paper",
           "chapter": "demo/ok", "scale": "ci"}
    bad = {**row, "claim": "c2", "holds": False, "kind": "check"}
    nbs = {"demo/ok": _fake_executed(mini_book, "demo/ok", [row, bad]),
           "demo/broken": _fake_executed(mini_book, "demo/broken", [row])}
    assert notebook_claims(nbs["demo/ok"]) == [row, bad]
    src = stage(mini_book, chapters(mini_book), nbs)
    assert (src / "book" / "demo" / "ok.ipynb").is_file()
    assert not (src / "book" / "demo" / "ok.md").exists()  # the executed notebook replaces the source
    board = (src / "book" / "scoreboard.md").read_text()
    assert "**2 of 2 paper claims hold**" in board and "0 of 1 of our own checks" in board
    assert "| check | c2 |" in board and "**NO**" in board
    assert "## A chapter that works" in board and "| 1 of 1 | 0 of 1 |" in board
    intro = (src / "book" / "intro.md").read_text()
    assert "A chapter that works <demo/ok>" in intro


def test_scoreboard_table_counts() -> None:
    row = {"claim": "c", "paper": "p", "measured": "m", "holds": False, "scale": "full"}
    table = scoreboard_table({"x/y": [row]})
    assert table.startswith("**0 of 1 paper claims hold**") and "`full`" in table and "| 0 of 1 |" in table


def test_scoreboard_link_text_shows_inline_math_as_unicode() -> None:
    """A ``{doc}`` link shows its text verbatim, so a title's ``$C_4^n$`` must not reach it raw."""
    from iclr25.book.build import link_text
    assert link_text("groups of four: $C_4^n$ sparsity") == "groups of four: C₄ⁿ sparsity"
    assert link_text("$x_{ij}^2$ and 5$") == "xᵢⱼ² and 5$"
    assert link_text(r"$\alpha_q$") == r"\alpha_q"          # no Unicode subscript q: kept
    row = {"claim": "c", "paper": "p", "measured": "m", "holds": True, "scale": "ci"}
    board = scoreboard_table({"e/c": [row]}, {"e/c": "Mamba: $C_4^n$"})
    assert "{doc}`Mamba: C₄ⁿ <e/c>`" in board and "## Mamba: $C_4^n$" in board



def test_download_button_serves_the_launch_notebook_with_the_run_outputs(mini_book: Path) -> None:
    """After Sphinx, ``_sources/<chapter>.ipynb`` (the download button's file) is the launch
    notebook with the outputs of the run the page shows (images too), without MyST or papermill's
    injected cell; the staged notebook that Sphinx copied there is neither."""
    from iclr25.book.browser import PageReport, check_download
    from iclr25.book.build import write_downloads, write_for_book
    from iclr25.book.launch import myst_leftovers
    from iclr25.book.runner import run_chapter

    ch = get_chapter("demo/ok")
    run = nbformat.read(run_chapter(ch, scale="ci", progress=False).notebook, as_version=4)
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    run.cells[-1].outputs.append(nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "fig"}))
    executed = mini_book / "_build" / "run.ipynb"
    nbformat.write(run, executed)
    out = mini_book / "_build" / "html"
    sphinx_copy = out / "_sources" / f"{ch.file}.ipynb"
    sphinx_copy.parent.mkdir(parents=True)
    write_for_book(executed, sphinx_copy)  # what Sphinx copies: the staged notebook
    before = PageReport("c")
    check_download(sphinx_copy, before)
    assert any("install cell" in p for p in before.problems)
    assert any("injected-parameters" in p for p in before.problems)

    assert write_downloads(mini_book, [ch], {ch.id: executed}, out, commit="c0ffee") == [sphinx_copy]
    nb = nbformat.read(sphinx_copy, as_version=4)
    assert nb.cells[0].metadata["tags"] == ["install"] and "c0ffee" in nb.cells[0].source
    assert not any("injected-parameters" in c.metadata.get("tags", []) for c in nb.cells)
    assert all(not myst_leftovers(c.source) for c in nb.cells if c.cell_type == "markdown")
    assert nb.cells[-1].outputs[0]["text"] == "6\n"  # the run's outputs, the image kept
    assert nb.cells[-1].outputs[-1]["data"]["image/png"] == png
    after = PageReport("c")
    check_download(sphinx_copy, after)
    assert after.problems == []
    nb.cells[1].source += "\n\nSee {cite}`x`."  # a MyST role left: the browser check says so
    nbformat.write(nb, sphinx_copy)
    check_download(sphinx_copy, after)
    assert any("MyST" in p for p in after.problems)


def test_stage_marks_the_tree_and_ends_citing_chapters_with_their_references(mini_book: Path) -> None:
    from iclr25.book.build import REFERENCES_MD
    from iclr25.book.sphinxext import STAGED_MARK

    nbs = {"demo/ok": _fake_executed(mini_book, "demo/ok", []),
           "demo/broken": _fake_executed(mini_book, "demo/broken", [])}
    nb = nbformat.read(nbs["demo/ok"], as_version=4)
    nb.cells.insert(0, nbformat.v4.new_markdown_cell("# Ok\n\nAs {cite:t}`liu2016svgd` showed."))
    nbformat.write(nb, nbs["demo/ok"])
    src = stage(mini_book, chapters(mini_book), nbs)
    assert (src / STAGED_MARK).is_file()
    ok = nbformat.read(src / "book" / "demo" / "ok.ipynb", as_version=4)
    assert ok.cells[-1].source == REFERENCES_MD and ok.cells[-1].cell_type == "markdown"
    broken = nbformat.read(src / "book" / "demo" / "broken.ipynb", as_version=4)
    assert all(c.source != REFERENCES_MD for c in broken.cells)  # cites nothing: no empty list
