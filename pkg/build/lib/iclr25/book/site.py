"""Where the book lives: read from ``_config.yml`` and nowhere else.

``repository.url`` is the one place the repository's address is written; ``repository.branch`` is
the branch the launch buttons open (the published notebooks); ``html.baseurl`` is where the
rendered book is served. The launch notebooks, the publish command, the staged intro page and the
browser test all read them from here.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import yaml


@dataclass(frozen=True)
class Site:
    """The book's addresses (from ``_config.yml``)."""

    repository_url: str
    notebooks_branch: str
    book_url: str
    binderhub_url: str
    colab_url: str
    notebook_interface: str = "jupyterlab"

    @property
    def owner_repo(self) -> str:
        """``owner/name`` of a GitHub repository URL."""
        return urlparse(self.repository_url).path.strip("/").removesuffix(".git")

    def pip_spec(self, commit: str) -> str:
        """The pip requirement that installs the package ``iclr25`` at ``commit``."""
        return f"iclr25 @ git+{self.repository_url}@{commit}#subdirectory=pkg"

    def source_url(self, path: str, commit: str, lines: tuple[int, int] | None = None) -> str:
        """A link to ``path`` (repository-relative) at ``commit``, optionally to a line range."""
        anchor = f"#L{lines[0]}-L{lines[1]}" if lines else ""
        return f"{self.repository_url}/blob/{commit}/{path}{anchor}"

    def raw_url(self, path: str, commit: str) -> str:
        """A link that serves the file ``path`` at ``commit`` itself (for images)."""
        return f"{self.repository_url}/raw/{commit}/{path}"

    def page_url(self, docname: str) -> str:
        """The rendered page of ``docname`` (``book/bibliography``)."""
        return f"{self.book_url.rstrip('/')}/{docname}.html"

    def colab_launch(self, notebook: str) -> str:
        """What the book's Colab button opens for the notebook ``book/<part>/<slug>.ipynb``."""
        return f"{self.colab_url.rstrip('/')}/github/{self.owner_repo}/blob/{self.notebooks_branch}/{notebook}"

    def binder_launch(self, notebook: str) -> str:
        """What the book's Binder button opens (its prefix: the book adds the interface's path)."""
        return f"{self.binderhub_url.rstrip('/')}/v2/gh/{self.owner_repo}/{self.notebooks_branch}"

    def binder_url(self, notebook: str) -> str:
        """What opens ``notebook`` on Binder in the configured interface (``launch_buttons.
        notebook_interface``: JupyterLab, which the Binder environment pins, or the classic one)."""
        path = f"lab/tree/{notebook}" if self.notebook_interface == "jupyterlab" else f"tree/{notebook}"
        return f"{self.binder_launch(notebook)}?urlpath={path}"

    @property
    def pages_url(self) -> str:
        """The GitHub Pages address of the repository (``https://OWNER.github.io/NAME/``)."""
        owner, _, name = self.owner_repo.partition("/")
        return f"https://{owner.lower()}.github.io/{name}/"


def load_config(root: Path) -> dict:
    return yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8")) or {}


def site(root: Path) -> Site:
    """The addresses in ``root/_config.yml``. A book URL that is not configured is the GitHub Pages
    address of the repository (``https://OWNER.github.io/NAME/``)."""
    cfg = load_config(root)
    repo = cfg.get("repository", {}) or {}
    url = str(repo.get("url", "")).rstrip("/")
    if not url:
        raise ValueError("_config.yml has no repository.url: the launch notebooks and the publish "
                         "command need the repository's address")
    launch = cfg.get("launch_buttons", {}) or {}
    book_url = str((cfg.get("html", {}) or {}).get("baseurl", "") or "")
    if not book_url:
        owner, _, name = urlparse(url).path.strip("/").removesuffix(".git").partition("/")
        book_url = f"https://{owner.lower()}.github.io/{name}/"
    return Site(repository_url=url, notebooks_branch=str(repo.get("branch", "notebooks")),
                book_url=book_url, binderhub_url=str(launch.get("binderhub_url", "https://mybinder.org")),
                colab_url=str(launch.get("colab_url", "https://colab.research.google.com")),
                notebook_interface=str(launch.get("notebook_interface", "jupyterlab")))


#: Tracked files that running chapters rewrite (measurements, not content): not "local changes".
MEASUREMENTS = ("book/timings.json",)


def git_commit(root: Path) -> tuple[str, bool]:
    """``(HEAD's full hash, whether tracked files differ from it)`` (the measured timings aside);
    ``("", True)`` outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "", True
    changed = [line[3:].strip() for line in status.splitlines() if line.strip()]
    return head, any(path not in MEASUREMENTS for path in changed)
