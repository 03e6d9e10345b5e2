"""The upload APIs of prefix.dev and anaconda.org, spoken through the toolkit's HTTP client.

The requests are the ones py-rattler-build 0.73 sends (its ``rattler_build.upload``, rattler's
``rattler_upload`` 0.10: ``upload/prefix.rs`` and ``upload/anaconda.rs``), which the servers accept; they are
made here so that each has timeouts, never follows a redirect and never sends the token elsewhere
(:mod:`flagtree_feedstock._http`):

- prefix.dev: ``POST {url}/api/v1/upload/{channel}``, ``multipart/form-data`` with one part ``file`` (the
  file name, ``application/octet-stream``, its ``Content-Length``, ``X-File-Name`` and ``X-File-SHA256``),
  ``Authorization: Bearer``; with an attestation (a Sigstore bundle), a second part ``attestation`` holding
  it as text, as ``create_upload_form`` adds it (conda/rattler ``crates/rattler_upload/src/upload/prefix.rs``).
  A 5xx answer is tried again up to three times, 1, 2 and 4 s apart (rattler retries three times, backing off
  exponentially); 409 means the channel holds that file name.
- anaconda.org (``Authorization: token``, ``x-binstar-api-version: 1.12.2``): ``GET package/{owner}/{name}``,
  then ``PATCH`` it (``POST`` when it answered 404) with the package's about.json; the same for
  ``release/{owner}/{name}/{version}``; ``POST stage/{owner}/{name}/{version}/{subdir}/{file}`` with the
  index.json, the labels and the sha256 answers where to send the file (409: the owner holds that file); the
  file goes there as a form, without the token (the storage is another server); ``POST commit/...`` with the
  answer's ``dist_id`` publishes it.

A failure is an :class:`UploadFailed`: one line that names the server, never the token (a server's answer is
quoted with the token masked, in every form a server may echo it: masked in all that was read, then cut to
what is shown). A name that goes into a multipart header (the package's file name, a field the staging answer
asks for) holding a quote, a line break or another control character is refused before anything is sent: it
could end the header and add others of its own (RFC 7578 leaves such names to each sender; a conda package
file name never holds one).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

from flagtree_feedstock._digest import file_digest
from flagtree_feedstock._foreign_json import parse_json
from flagtree_feedstock._foreign_text import bounded
from flagtree_feedstock._http import (
    Answer,
    Credential,
    HttpError,
    Origin,
    Timeouts,
    open_request,
    redact,
    status_text,
)

from .package_info import package_info

LOGGER = logging.getLogger(__name__)

RETRY_DELAYS = (1, 2, 4)  # seconds before each new try of a prefix.dev upload answered 5xx
ANACONDA_HEADERS = {"Accept": "application/json", "x-binstar-api-version": "1.12.2"}
SNIPPET = 200  # characters of a server's refusal quoted in the error
REFUSAL_READ = 64 << 10  # bytes of a refusal read, and masked whole, before SNIPPET characters are shown
# What may not be in a name inside a multipart header: a quote ends the name, a control character the line.
_UNSAFE_IN_HEADER = re.compile(r'["\\\x00-\x1f\x7f]')


class UploadFailed(Exception):
    """One package's upload failed: why (one line, the token masked), the answer's status, whether the server
    holds that file name (409) and, for a failure of the connection itself, what to do."""

    def __init__(
        self,
        reason: str,
        *,
        status: int | None = None,
        conflict: bool = False,
        fix: str | None = None,
        timed_out: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.conflict = conflict
        self.fix = fix
        self.timed_out = timed_out


@dataclass(frozen=True, kw_only=True)
class Api:
    """One server's API, as the owner of ``credential``."""

    url: str  # the server's base URL, without a trailing slash
    credential: Credential
    timeouts: Timeouts

    def refusal(self, answer: Answer, method: str, url: str) -> UploadFailed:
        """A refusal, quoting the start of the server's answer (the token masked)."""
        data, cut = bytearray(), False
        try:
            for chunk in answer.chunks(REFUSAL_READ):
                data += chunk
                if len(data) >= REFUSAL_READ:
                    cut = True
                    break
        except HttpError:
            cut = True
        # Masked in all that was read (a token straddling the end of the read too), then cut to what is shown.
        text = redact(data[:REFUSAL_READ].decode("utf-8", "replace"), self.credential.secret, cut=cut)
        text = " ".join(text.split())
        text = bounded(text, SNIPPET)
        server = "the server" if Origin.of(url) == self.credential.origin else str(Origin.of(url))
        where = f"{server} answered {method} {urlsplit(url).path} with {status_text(answer.status)}"
        return UploadFailed(
            f"{where}: {text}" if text else where, status=answer.status, conflict=answer.status == 409
        )

    def exists(self, url: str) -> bool:
        """GET ``url``: True for 200, False for 404."""
        with open_request(
            "GET", url, timeouts=self.timeouts, credential=self.credential, headers=ANACONDA_HEADERS
        ) as answer:
            if answer.status in (200, 404):
                return answer.status == 200
            raise self.refusal(answer, "GET", url)

    def send_json(self, method: str, url: str, payload: object) -> dict[str, object]:
        """``method`` ``url`` with a JSON body; the JSON object it answers (``{}`` for anything else)."""
        headers = {**ANACONDA_HEADERS, "Content-Type": "application/json"}
        with open_request(
            method,
            url,
            timeouts=self.timeouts,
            credential=self.credential,
            headers=headers,
            body=(json.dumps(payload).encode(),),
        ) as answer:
            if not 200 <= answer.status < 300:
                raise self.refusal(answer, method, url)
            data = answer.read_all()
        try:
            document = parse_json(data or b"{}")
        except ValueError:
            return {}
        return document if isinstance(document, dict) else {}


def upload_to_prefix(api: Api, channel: str, package: Path, attestation: bytes | None = None) -> None:
    """Upload ``package`` to the prefix.dev channel ``channel``, with its attestation where given."""
    try:
        _prefix(api, channel, package, attestation)
    except HttpError as exc:
        raise UploadFailed(exc.message, fix=exc.fix, timed_out=exc.timed_out) from None


def upload_to_anaconda(api: Api, owner: str, labels: tuple[str, ...], package: Path) -> None:
    """Upload ``package`` to anaconda.org's ``owner``, on ``labels``."""
    try:
        _anaconda(api, owner, labels, package)
    except HttpError as exc:
        raise UploadFailed(exc.message, fix=exc.fix, timed_out=exc.timed_out) from None


def _prefix(api: Api, channel: str, package: Path, attestation: bytes | None) -> None:
    url = f"{api.url}/api/v1/upload/{_segment(channel)}"
    size = package.stat().st_size
    boundary = secrets.token_hex(16)
    head = (
        f"--{boundary}\r\n"
        f'Content-Disposition: form-data; name="file"; filename="{_header_safe(package.name)}"\r\n'
        "Content-Type: application/octet-stream\r\n"
        f"Content-Length: {size}\r\n"
        f"X-File-Name: {package.name}\r\n"
        f"X-File-SHA256: {file_digest(package, 'sha256').hex()}\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    if attestation is not None:
        part = f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="attestation"\r\n\r\n'
        tail = part.encode() + attestation + tail
    for delay in (*RETRY_DELAYS, None):
        with open_request(
            "POST",
            url,
            timeouts=api.timeouts,
            credential=api.credential,
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
            body=(head, package, tail),
        ) as answer:
            if 200 <= answer.status < 300:
                answer.read_all()  # a success is an answer read whole: one that breaks off is a failure
                return
            failure = api.refusal(answer, "POST", url)
        if answer.status < 500:
            raise failure
        if delay is None:
            failure.reason += f" (tried {len(RETRY_DELAYS) + 1} times)"
            raise failure
        LOGGER.info("%s: %s; trying again in %d s", package.name, failure.reason, delay)
        time.sleep(delay)


def _anaconda(api: Api, owner: str, labels: tuple[str, ...], package: Path) -> None:
    _header_safe(package.name)  # before the first request: it goes into the storage's form at the end
    index, about = package_info(package)
    name, version, subdir = (str(index.get(key, "")) for key in ("name", "version", "subdir"))
    if not (name and version and subdir):
        raise UploadFailed(f"{package.name}: its info/index.json lacks the name, version or subdir")
    where = "/".join(_segment(part) for part in (owner, name))
    package_url = f"{api.url}/package/{where}"
    attributes = {"package_types": ["conda"], "name": name, **about}
    payload = {"public": True, "publish": False, "public_attrs": attributes}
    api.send_json("PATCH" if api.exists(package_url) else "POST", package_url, payload)
    release_url = f"{api.url}/release/{where}/{_segment(version)}"
    release = {"requirements": [], "announce": False, "description": None}
    if api.exists(release_url):
        api.send_json("PATCH", release_url, {**release, "public_attrs": about})
    else:
        api.send_json("POST", release_url, {**release, **about})
    file_path = f"{where}/{_segment(version)}/{_segment(subdir)}/{_segment(package.name)}"
    stage = {
        "distribution_type": "conda",
        "description": None,
        "attrs": index,
        "channels": list(labels),
        "sha256": file_digest(package, "sha256").hex(),
    }
    staged = api.send_json("POST", f"{api.url}/stage/{file_path}", stage)
    post_url, form, dist_id = staged.get("post_url"), staged.get("form_data"), staged.get("dist_id")
    if not isinstance(post_url, str) or not isinstance(form, dict) or not isinstance(dist_id, str):
        raise UploadFailed(
            f"{Origin.of(api.url)} answered the staging of {package.name} without where to send it"
        )
    _send_to_storage(api, post_url, {str(k): str(v) for k, v in form.items()}, package)
    api.send_json("POST", f"{api.url}/commit/{file_path}", {"dist_id": dist_id})


def _send_to_storage(api: Api, url: str, fields: Mapping[str, str], package: Path) -> None:
    """The file, as the form the staging answer asked for; the storage is another server: no token."""
    boundary = secrets.token_hex(16)
    fields = {
        **fields,
        "Content-Length": str(package.stat().st_size),
        "Content-MD5": base64.b64encode(file_digest(package, "md5")).decode(),
    }
    head = "".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{_header_safe(key, _FORM_FIX)}"\r\n\r\n{value}\r\n'
        for key, value in fields.items()
    )
    head += (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
        f'filename="{_header_safe(package.name)}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    )
    with open_request(
        "POST",
        url,
        timeouts=api.timeouts,
        headers={"Accept": "application/json", "Content-Type": f"multipart/form-data; boundary={boundary}"},
        body=(head.encode(), package, f"\r\n--{boundary}--\r\n".encode()),
    ) as answer:
        if not 200 <= answer.status < 300:
            raise api.refusal(answer, "POST", url)
        answer.read_all()


_FORM_FIX = (
    "the staging answer asks for a form field no upload form has: check that the server is anaconda.org's API"
)
_FILE_NAME_FIX = "give the package the file name its build wrote (name-version-build), which has none"


def _header_safe(name: str, fix: str = _FILE_NAME_FIX) -> str:
    """``name`` as it goes into a multipart header; one holding a quote, a backslash or a control character
    (a line break above all) is refused, so no name can end its header and add others."""
    found = _UNSAFE_IN_HEADER.search(name)
    if found is not None:
        raise UploadFailed(
            f"not sent: the name {name!r} holds {found.group()!r}, which would break out of its multipart "
            "header",
            fix=fix,
        )
    return name


def _segment(value: str) -> str:
    """One path segment, quoted as a URL library joins it (a conda name or version keeps ``+``, ``!``)."""
    return quote(value, safe="!$&'()*+,;=:@")
