"""The CEP 27 publish attestations an upload to prefix.dev sends with its packages, checked before any request.

The publish job's ``attest`` jobs (``.github/workflows/build.yml``) make one attestation per package file with
``actions/attest``: an in-toto statement whose predicate type is :data:`PREDICATE_TYPE`, whose one subject is
the package file (its name and sha256) and whose predicate is ``{"targetChannel": "<channel URL>"}``, signed
with Sigstore from the job's identity and saved as a Sigstore bundle (JSON). Each is named after its package,
``<package file name>.sigstore.json``, in one folder, which ``upload --attestations DIR`` reads.

Here each bundle is read (by the one reader, ``_own_files``: a regular file of the folder, at most
:data:`MAX_BUNDLE_BYTES`, actions/attest's own limit on a predicate) and its
statement (the DSSE envelope's payload) is checked against the package it goes with: CEP 27's single subject
with the file's name and sha256, its predicate type, and the channel it names, so a bundle of another package,
another build or another channel is refused before anything is sent. The signature is not checked here: it is
for the server (CEP 27 asks servers to) and for a user, with ``gh attestation verify`` (docs/ci-and-publishing.md).
"""

from __future__ import annotations

import base64
from pathlib import Path

from flagtree_feedstock._digest import file_digest
from flagtree_feedstock._foreign_json import parse_json
from flagtree_feedstock._foreign_text import quoted
from flagtree_feedstock._own_files import ATTESTATION, NotThere, read_own
from flagtree_feedstock.errors import ConfigurationError

PREDICATE_TYPE = "https://schemas.conda.org/attestations-publish-1.schema.json"
IN_TOTO_PAYLOAD = "application/vnd.in-toto+json"
SUFFIX = ".sigstore.json"
MAX_BUNDLE_BYTES = ATTESTATION.limit


def bundle_name(package: Path) -> str:
    """The file name of ``package``'s bundle in an attestations folder."""
    return package.name + SUFFIX


def read_attestations(folder: Path, packages: list[Path], target_channel: str) -> dict[Path, bytes]:
    """Each package's bundle from ``folder`` (its bytes, sent as they are), checked; every problem of every bundle in one error."""
    if not folder.is_dir():
        raise ConfigurationError(
            f"--attestations {folder} is not a folder",
            fix="pass the folder of the publish job's attestations, one <package file>.sigstore.json each",
        )
    found: dict[Path, bytes] = {}
    problems: list[str] = []
    for package in packages:
        path = folder / bundle_name(package)
        problem: str | None
        try:
            # No FIFO, device or link out of the folder (the bytes are sent as they are), at most 16 MiB.
            bundle = read_own(path, ATTESTATION, inside=folder, place=f"the folder {folder}").data
        except NotThere:
            problem = f"no {path.name}"
        else:
            problem = _problem(bundle, path.name, package, target_channel)
            if problem is None:
                found[package] = bundle
        if problem is not None:
            problems.append(f"{package.name}: {problem}")
    if problems:
        raise ConfigurationError(
            f"the attestations in {folder} do not fit the packages: {'; '.join(problems)}",
            fix="attest each package file of this folder (actions/attest, predicate type "
            f"{PREDICATE_TYPE}, targetChannel {target_channel}) and name its bundle <package file>{SUFFIX}",
        )
    return found


def _problem(bundle: bytes, name: str, package: Path, target_channel: str) -> str | None:
    """Why ``bundle`` (the file ``name``) is not ``package``'s attestation for ``target_channel``, or None."""
    statement = _statement(bundle)
    if statement is None:
        return f"{name} is not a Sigstore bundle of an in-toto statement (a DSSE envelope's payload)"
    if statement.get("predicateType") != PREDICATE_TYPE:
        return f"{name} has the predicate type {quoted(statement.get('predicateType'))}, not CEP 27's"
    predicate = statement.get("predicate")
    channel = predicate.get("targetChannel") if isinstance(predicate, dict) else None
    if channel != target_channel:
        return f"{name} names the target channel {quoted(channel)}, not {target_channel}"
    return _subject_problem(statement.get("subject"), name, package)


def _subject_problem(subjects: object, name: str, package: Path) -> str | None:
    """Why ``subjects`` is not CEP 27's one subject, ``package`` (its file name and sha256), or None."""
    if not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(subjects[0], dict):
        return f"{name} does not name exactly one subject (CEP 27: the package file alone)"
    subject, digest = subjects[0].get("name"), subjects[0].get("digest")
    if subject != package.name:
        return f"{name} attests {quoted(subject)}, another file"
    sha256 = digest.get("sha256") if isinstance(digest, dict) else None
    local = file_digest(package, "sha256").hex()
    if not isinstance(sha256, str) or sha256.lower() != local:
        there = f"{sha256[:12]}…" if isinstance(sha256, str) else "none"
        return f"{name} attests another sha256 ({there} there, {local[:12]}… here): another build"
    return None


def _statement(data: bytes) -> dict[str, object] | None:
    """The in-toto statement a Sigstore bundle signs, or None where ``data`` is not such a bundle (nor JSON
    within :mod:`.._foreign_json`'s bounds: a bundle nested too deep is not one)."""
    try:
        envelope = parse_json(data, limit=MAX_BUNDLE_BYTES).get("dsseEnvelope")  # type: ignore[attr-defined]
        if envelope.get("payloadType") != IN_TOTO_PAYLOAD:
            return None
        statement = parse_json(base64.b64decode(envelope["payload"], validate=True), limit=MAX_BUNDLE_BYTES)
    except (ValueError, AttributeError, KeyError, TypeError):  # binascii.Error and ForeignJsonError too
        return None
    return statement if isinstance(statement, dict) else None
