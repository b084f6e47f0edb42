"""What a reader reaches: the install cell of a launch notebook, the publish command's refusal of an
unpushed commit, the book's addresses in ``_config.yml``, and the package's README."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from iclr25.book import publish, reader
from iclr25.book.launch import install_cell
from iclr25.book.site import Site, load_config, site

ROOT = Path(__file__).resolve().parents[2]
SITE = Site(repository_url="https://github.com/O/r", notebooks_branch="notebooks",
            book_url="https://o.github.io/r/", binderhub_url="https://mybinder.org",
            colab_url="https://colab.research.google.com")


def test_install_cell_is_tagged_and_generated_from_the_reader_list(tmp_path: Path) -> None:
    cell = install_cell(SITE, "c" * 40, ROOT)
    assert cell.metadata["tags"] == ["install"]
    assert cell.source == reader.colab_cell_source(ROOT, "c" * 40, repository_url=SITE.repository_url)
    assert f"git+https://github.com/O/r@{'c' * 40}#subdirectory=pkg" in cell.source
    # a book root without its own list (a test's miniature book) gets this checkout's
    assert install_cell(SITE, "c" * 40, tmp_path).source == cell.source


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main",
                           "-C", str(cwd), *args], check=True, capture_output=True, text=True).stdout


def test_publish_refuses_a_commit_the_remote_does_not_have(tmp_path: Path) -> None:
    remote, clone = tmp_path / "remote.git", tmp_path / "clone"
    _git(tmp_path, "init", "-q", "--bare", str(remote))
    _git(tmp_path, "clone", "-q", str(remote), str(clone))
    (clone / "_config.yml").write_text("repository:\n  url: https://github.com/o/r\n")
    _git(clone, "add", "-A")
    _git(clone, "commit", "-q", "-m", "first")
    head = _git(clone, "rev-parse", "HEAD").strip()
    with pytest.raises(RuntimeError, match=f"push {head} first: the Colab install cell pins it"):
        publish.check_pushed(clone, head)
    with pytest.raises(RuntimeError, match=f"push {head} first"):  # publish itself checks, before any build
        publish.publish(clone, echo=lambda _: None)
    _git(clone, "push", "-q", "origin", "HEAD:main")
    publish.check_pushed(clone, head)  # the push updated origin/main: no fetch needed
    (clone / "x.txt").write_text("later\n")
    _git(clone, "add", "-A")
    _git(clone, "commit", "-q", "-m", "second")
    with pytest.raises(RuntimeError, match="push .* first"):
        publish.check_pushed(clone, _git(clone, "rev-parse", "HEAD").strip())


def test_config_serves_the_book_from_github_pages_and_binder_in_jupyterlab() -> None:
    cfg, s = load_config(ROOT), site(ROOT)
    assert cfg["html"]["baseurl"] == s.pages_url == s.book_url
    owner, name = s.owner_repo.split("/")
    assert s.book_url == f"https://{owner.lower()}.github.io/{name}/"
    assert cfg["launch_buttons"]["notebook_interface"] == "jupyterlab"
    assert s.notebook_interface == "jupyterlab"
    env = yaml.safe_load((ROOT / "binder" / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert any(p.startswith("jupyterlab==") for p in pip), "Binder's interface must be installed there"


def test_site_without_baseurl_derives_the_pages_address(tmp_path: Path) -> None:
    (tmp_path / "_config.yml").write_text("repository:\n  url: https://github.com/Some-Org/a-book.git\n")
    s = site(tmp_path)
    assert s.book_url == "https://some-org.github.io/a-book/" == s.pages_url
    assert s.binder_url("book/p/c.ipynb") == ("https://mybinder.org/v2/gh/Some-Org/a-book/notebooks"
                                             "?urlpath=lab/tree/book/p/c.ipynb")
    classic = Site(**{**s.__dict__, "notebook_interface": "classic"})
    assert classic.binder_url("n.ipynb").endswith("?urlpath=tree/n.ipynb")


def test_package_readme_says_how_to_install_and_what_is_inside() -> None:
    text = (ROOT / "pkg" / "README.md").read_text()
    s, lst = site(ROOT), reader.reader_list(ROOT)
    assert f'pip install "iclr25 @ git+{s.repository_url}#subdirectory=pkg"' in text
    assert reader.TORCH_CPU_INDEX in text
    assert f"pip install --no-deps {' '.join(lst.no_deps)}" in text
    for extra in ("`book`", "`test`", "`data`"):
        assert extra in text
    for sub in sorted(p.parent.name for p in (ROOT / "pkg" / "iclr25").glob("*/__init__.py")):
        assert f"`iclr25.{sub}`" in text, f"pkg/README.md has no line for iclr25.{sub}"


def test_readme_says_how_conda_users_set_up() -> None:
    text = (ROOT / "README.md").read_text()
    assert "conda env create -f environment.yml" in text
    assert "pip install --no-deps" in text and "Jupyter Book 2" in text
