"""What an upload server already holds under a package's file name: its digest, or nothing.

A rerun of ``flagtree-feedstock upload`` after a partial failure asks this first, so it skips what is already
there with the same content and refuses only a different file under the same name. Both servers answer an
upload of a file name they hold with HTTP 409 and say nothing about the content, so the content is read here:

- prefix.dev is a conda channel host: ``GET {url}/{channel}/{subdir}/repodata.json`` (a Bearer token opens a
  private channel) lists every file of the subdir with its ``sha256``, as every conda channel's repodata does;
  a subdir with no package yet answers 404. (rattler's ``upload_package_to_prefix`` posts the file to
  ``{url}/api/v1/upload/{channel}`` and maps a 409 to "already exists"; pixi reads prefix.dev channels with
  the same Bearer token.)
- anaconda.org: ``GET {api}/dist/{owner}/{name}/{version}/{subdir}%2F{file}`` with ``Authorization: token``
  answers 404 for a file it does not hold, else the file's record (anaconda-client's ``distribution()``;
  conda-forge's webservices compare that record's ``md5`` with their outputs' before copying them, and the
  ``/stage`` call of an upload sends the file's ``sha256``). The record's ``sha256`` is compared where it
  has one, else its ``md5``; its ``labels``, where listed, must hold every label asked for.

Nothing here prints or returns the token or a server's response body. The requests go through the toolkit's
HTTP client (:mod:`flagtree_feedstock._http`): the token goes to the server's own origin only, a redirect
elsewhere is an error, and every request has the upload's timeouts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from flagtree_feedstock._digest import file_digest
from flagtree_feedstock._foreign_json import parse_json
from flagtree_feedstock._http import Credential, HttpError, Timeouts, open_request, shown_url, status_text
from flagtree_feedstock.errors import ChannelError

Server = Literal["prefix", "anaconda"]
Algorithm = Literal["sha256", "md5"]
ALGORITHMS: tuple[Algorithm, ...] = ("sha256", "md5")  # the first one a record gives is compared
AUTH_SCHEMES: Mapping[Server, str] = {"prefix": "Bearer", "anaconda": "token"}


@dataclass(frozen=True, kw_only=True)
class Held:
    """A file the server holds under the package's name: a digest (``algorithm``, hex) and its labels."""

    algorithm: Algorithm
    digest: str
    labels: tuple[str, ...] | None = None  # anaconda.org only; None where the answer lists none

    def differs_from(self, package: Path, labels: tuple[str, ...]) -> str | None:
        """Why ``package`` (to go on ``labels``) is not this file, or ``None`` when it is."""
        local = file_digest(package, self.algorithm).hex()
        if local != self.digest.lower():
            return f"another {self.algorithm} ({self.digest[:12]}… there, {local[:12]}… here)"
        missing = [label for label in labels if self.labels is not None and label not in self.labels]
        if missing:
            return f"the same file, on label(s) {', '.join(self.labels or ())}, not {', '.join(missing)}"
        return None


@dataclass(frozen=True, kw_only=True)
class ServerFiles:
    """Looks files up on one server, as the token's owner."""

    server: Server
    url: str
    channel: str
    credential: Credential
    variable: str  # the token's environment variable, for the fix of a refused lookup
    timeouts: Timeouts

    def held(self, package: Path) -> Held | None:
        """The file the server holds under ``package``'s name (in its subdir), or ``None``."""
        subdir, base = package.parent.name, self.url.rstrip("/")
        if self.server == "prefix":
            repodata = self._get(f"{base}/{quote(self.channel)}/{subdir}/repodata.json", package)
            record = None
            for key in ("packages", "packages.conda"):
                files = (repodata or {}).get(key)
                if isinstance(files, dict) and isinstance(files.get(package.name), dict):
                    record = files[package.name]
            return None if record is None else _held(record, package)
        name, version, _ = package.name.rsplit("-", 2)
        basename = quote(f"{subdir}/{package.name}", safe="")
        record = self._get(f"{base}/dist/{quote(self.channel)}/{name}/{version}/{basename}", package)
        return None if record is None else _held(record, package)

    def _get(self, url: str, package: Path) -> dict[str, object] | None:
        """The JSON answer to GET ``url``, ``None`` for a 404; anything else is one error without the body."""
        what = f"asking {self.server} at {shown_url(self.url)} whether it holds {package.name}"
        try:
            with open_request(
                "GET",
                url,
                timeouts=self.timeouts,
                credential=self.credential,
                headers={"Accept": "application/json"},
            ) as response:
                if response.status == 404:
                    return None
                if not 200 <= response.status < 300:  # the body (which may echo the token) is never read
                    fix = (
                        f"check {self.variable} (its scopes) and the channel name"
                        if response.status in (401, 403)
                        else "retry later, or check --url"
                    )
                    raise ChannelError(f"{what} failed: {status_text(response.status)}", fix=fix)
                data = response.read_all()
        except HttpError as exc:
            fix = f"{exc.fix}, or give it longer with --timeout" if exc.timed_out else exc.fix
            raise ChannelError(f"{what} failed: {exc}", fix=fix) from None
        try:
            answer = parse_json(data or b"{}")
        except ValueError as exc:
            raise ChannelError(
                f"{what} failed: the answer cannot be read: {exc}", fix="check --url"
            ) from None
        if not isinstance(answer, dict):
            raise ChannelError(f"{what} failed: the answer is not a JSON object", fix="check --url")
        return answer


def _held(record: Mapping[str, object], package: Path) -> Held:
    """A file record (repodata's, or anaconda.org's ``/dist`` answer) as what the server holds."""
    labels = record.get("labels")
    listed = tuple(str(label) for label in labels) if isinstance(labels, list) else None
    for algorithm in ALGORITHMS:
        digest = record.get(algorithm)
        if isinstance(digest, str) and digest:
            return Held(algorithm=algorithm, digest=digest, labels=listed)
    raise ChannelError(
        f"the server holds {package.name} but says neither its sha256 nor its md5, so it cannot be compared",
        fix="compare it by hand, then remove it from the channel or leave this package out",
    )
