"""conda-smithy's CLI, offline: ``python conda_smithy_offline.py ARGS`` runs ``conda-smithy ARGS``, run by the
python of conda-smithy's own environment (tests/_smithy.py).

conda-smithy reads two remote inputs: conda-forge's linter hints (the pinning feedstock's
``recipe/linter_hints/hints.toml``) and the bot's schema that conda-forge.yml's schema refers to. Both are
served from local copies in ``$CONDA_SMITHY_DATA`` (``hints.toml``, ``cf_tick_schema.json``); every other HTTP
request fails as on a machine without a route to GitHub, so a recipe maintainer conda-smithy cannot look up
gives its "Could not verify ... transient GitHub error" lint, and nothing else does. Retries do not wait.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import requests

DATA = Path(os.environ["CONDA_SMITHY_DATA"])
HINTS = "https://raw.githubusercontent.com/conda-forge/conda-forge-pinning-feedstock/main/recipe/linter_hints/hints.toml"


def _response(url: str, status: int, body: bytes = b"") -> requests.Response:
    response = requests.models.Response()
    response.status_code, response._content, response.url = status, body, url
    return response


def _get(url: str, *args: Any, **kwargs: Any) -> requests.Response:
    if url == HINTS:
        return _response(url, 200, (DATA / "hints.toml").read_bytes())
    raise requests.exceptions.ConnectionError(f"offline: GET {url}")


def _head(url: str, *args: Any, **kwargs: Any) -> requests.Response:
    raise requests.exceptions.ConnectionError(f"offline: HEAD {url}")


if __name__ == "__main__":
    os.environ.setdefault("CONDA_SMITHY_BOT_SCHEMA_URI", (DATA / "cf_tick_schema.json").as_uri())
    requests.get, requests.head = _get, _head
    import conda_smithy.lint_recipe

    conda_smithy.lint_recipe.time.sleep = lambda seconds: None
    from conda_smithy.cli import main

    sys.argv = ["conda-smithy", *sys.argv[1:]]
    sys.exit(main())
