"""Solving and installing with py-rattler (``channel install``'s smoke install), from the toolkit's own copies.

py-rattler's installer installs what it downloads, unchecked, read its own way. So the records a solve took are
pointed at copies the toolkit wrote (:func:`use_repacked_copies`, :mod:`.repack`): a local channel's package
is repacked from its file; a remote channel's is first downloaded by the toolkit itself (:mod:`.download`, with
the credentials of its origin, checked against the index's sha256 and size). The records carry the copy's
``file://`` URL, sha256, md5 and size: the installer never downloads again, and takes no other file of that
name from its cache.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from flagtree_feedstock._engine import first_line, require, settled
from flagtree_feedstock._http import Timeouts
from flagtree_feedstock._interrupts import deferred_interrupts
from flagtree_feedstock._paths import check_folder
from flagtree_feedstock._urls import shown_url
from flagtree_feedstock.errors import ChannelError, ConfigurationError, DependencyError, FeedstockError
from flagtree_feedstock.platforms import PlatformName

from .credentials import EngineChannels, split_credentials, with_own_credentials
from .download import Authorize, download
from .folder import build_into, check_channels, check_readable_index, local_folder, package_files
from .index_relay import TIMEOUTS, serving
from .link_scripts import NONE_ALLOWED, LinkScriptPolicy
from .package_check import check_package, shell_word
from .repack import repacked, user_cache

# What a linux-aarch64 (or linux-64) machine of the supported floor offers the solver: glibc 2.17 is
# conda-forge's `c_stdlib_version` for linux-aarch64 (conda-forge-pinning), and the archspec names the
# CPU family. Used only when the target is not this host, where detection would describe the wrong machine.
_TARGET_VIRTUAL_PACKAGES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "linux-aarch64": (
        ("__unix", "0", "0"),
        ("__linux", "5.10", "0"),
        ("__glibc", "2.17", "0"),
        ("__archspec", "1", "aarch64"),
    ),
    "linux-64": (
        ("__unix", "0", "0"),
        ("__linux", "5.10", "0"),
        ("__glibc", "2.17", "0"),
        ("__archspec", "1", "x86_64"),
    ),
}


def _not_indexed(channel_dir: Path) -> FeedstockError:
    """Why ``channel_dir`` cannot be installed from; the fix suggests indexing only where that works."""
    if not channel_dir.is_dir():  # a path that names nothing is bad input (2), as for `channel index`
        return ConfigurationError(f"channel folder {channel_dir} does not exist", fix=build_into(channel_dir))
    if not package_files(channel_dir):
        return ChannelError(
            f"channel folder {channel_dir} holds no packages (*.conda, *.tar.bz2 in its subdirs)",
            fix=build_into(channel_dir),
        )
    return ChannelError(
        f"{channel_dir} is not an indexed channel (no noarch/repodata.json)",
        fix=f"run: flagtree-feedstock channel index {shell_word(channel_dir)}",
    )


def _match_specs(rattler: Any, errors: Any, specs: Sequence[str]) -> list[Any]:  # noqa: ANN401 - py-rattler
    """``specs`` read as py-rattler's solver reads a string (strictly); a spec it cannot read is bad input.

    Strictly: ``flagtree cpu`` is refused (the lenient reading is ``flagtree ==cpu``, a package
    called flagtree at version cpu), and the solver is given these very specs.
    """
    parsed = []
    for spec in specs:
        try:
            parsed.append(rattler.MatchSpec(spec, strict=True))
        except errors.InvalidMatchSpecError as exc:
            raise ConfigurationError(
                f"{spec!r} is not a match spec: {first_line(exc)}",
                fix="write NAME, 'NAME >=VERSION' or 'NAME ==VERSION BUILD', e.g. 'flagtree-cpu >=0.6'; "
                "a space ends the name",
            ) from None
    return parsed


def _unreachable(exc: Exception, names: Sequence[str], channels: Sequence[Any]) -> ChannelError:
    """A channel whose index could not be fetched: name it (the one in the engine's message, else all)."""
    reason = first_line(exc)
    named = [n for n, c in zip(names, channels, strict=True) if c.base_url in reason] or list(names)
    return ChannelError(
        f"channel {', '.join(named)} is unreachable: {_with_cause(exc)}",
        fix="check the network and the http(s)_proxy variables, or install without that -c channel",
    )


def _unsolvable(
    exc: Exception, channel_dir: Path, specs: Sequence[str], names: set[str], platform: PlatformName
) -> DependencyError:
    """A failed solve; when the folder holds the asked-for packages only for another platform, say which."""
    held: dict[str, set[str]] = {}
    for package in package_files(channel_dir):
        held.setdefault(package.parent.name, set()).add(package.name.rsplit("-", 2)[0])
    here = held.get(platform, set()) | held.get("noarch", set())
    elsewhere = sorted(
        subdir for subdir, found in held.items() if found & names and subdir not in (platform, "noarch")
    )
    if elsewhere and not names & here:
        return DependencyError(  # what cannot be solved is 7, in every command (build's solve too)
            f"{channel_dir} holds {', '.join(sorted(names))} for {', '.join(elsewhere)}, not for {platform}",
            fix=f"pass --target-platform {elsewhere[0]}",
        )
    return DependencyError(
        f"cannot solve {' '.join(specs)} from {channel_dir} for {platform}: {first_line(exc)}",
        fix="check the package name and that its dependencies are in the channel or in --channel",
    )


def _with_cause(exc: BaseException) -> str:
    """The first line of py-rattler's message and, when it has a chain of causes, the last cause."""
    first = first_line(exc)
    cause = str(exc).strip().splitlines()[-1].removeprefix("Caused by: ").strip() if str(exc).strip() else ""
    return f"{first} ({cause})" if cause and cause != first else first


@dataclass(frozen=True, kw_only=True)
class InstalledPackage:
    """A package a smoke install put into the scratch prefix."""

    name: str
    version: str
    build: str
    channel: str


def use_repacked_copies(
    records: Sequence[Any],
    folder: Path,
    cache: Path,
    *,
    authorize: Authorize,
    link_scripts: LinkScriptPolicy,
) -> bool:
    """Point every record (py-rattler's ``RepoDataRecord``) at the toolkit's own copy of its package
    (:func:`.repack.repacked`, cached in ``cache``): a local channel's from its file, a remote channel's
    downloaded into ``folder`` first with ``authorize``. Whether any of them runs link scripts, which
    ``link_scripts`` allowed (one it does not allow is refused)."""
    runs_scripts = False
    for number, record in enumerate(records):
        url = str(record.url)
        if urlsplit(url).scheme == "file":
            original, source = Path(unquote(urlsplit(url).path)), None
        else:
            original, source = folder / str(number) / str(record.file_name), shown_url(url)
            expected = record.sha256.hex() if record.sha256 else None
            download(url, original, sha256=expected, size=record.size, authorize=authorize)
        copy = repacked(original, cache, file_name=str(record.file_name), source=source)
        runs_scripts |= link_scripts.admit(copy.name, copy.link_scripts, where=source or str(original))
        record.url = copy.path.as_uri()
        # The installer's cache takes this copy, no other of its name, and checks it against these.
        record.sha256 = bytes.fromhex(copy.sha256)
        record.md5 = bytes.fromhex(copy.md5)
        record.size = copy.size
    return runs_scripts


def smoke_install(
    channel_dir: Path,
    specs: Sequence[str],
    *,
    prefix: Path,
    platform: PlatformName,
    extra_channels: Sequence[str] = (),
    link_scripts: LinkScriptPolicy = NONE_ALLOWED,
    cache: Path | None = None,
    timeout: float | None = None,
) -> list[InstalledPackage]:
    """Solve ``specs`` against the local channel (plus ``extra_channels``) and install into ``prefix``.

    Every package installed is checked first (:func:`check_package`): a local channel's before the solve, a
    remote channel's once the solve took it, downloaded into a folder of the run's own and installed from that
    checked copy (:mod:`.download`). One that carries link scripts is refused unless ``link_scripts``
    allows it; the scripts of those it allows run. The extra channels reach the solve through the toolkit's
    server on loopback (:mod:`.index_relay`), each request to them within ``timeout`` seconds whole (else
    :data:`.index_relay.TIMEOUTS`); a channel it cannot read stops the install in one line.
    """
    rattler = require("rattler", "py-rattler")
    errors = require("rattler.exceptions", "py-rattler")
    if channel_dir.exists() and not channel_dir.is_dir():
        raise ConfigurationError(
            f"{channel_dir} is a file, not a channel folder",
            fix="pass the folder that holds noarch/ and the platform subdirs",
        )
    if not (channel_dir / "noarch" / "repodata.json").is_file():
        raise _not_indexed(channel_dir)
    check_channels(extra_channels)
    # rattler never sees a channel's secret (in its URL, or in your RATTLER_AUTH_FILE): the relay sends it
    engine = with_own_credentials(split_credentials(extra_channels), os.environ)
    for package in package_files(channel_dir):
        check_package(package)
    local_folders = [channel_dir, *(f for f in map(local_folder, extra_channels) if f is not None)]
    for folder in local_folders:
        check_readable_index(folder, platform)
    match_specs = _match_specs(rattler, errors, specs)
    names = {spec.name.normalized for spec in match_specs}
    check_folder(prefix, option="--prefix")
    if prefix.exists() and any(prefix.iterdir()):
        raise ConfigurationError(f"prefix {prefix} is not empty", fix="pass a new or empty --prefix")
    local = rattler.Channel(channel_dir.resolve().as_uri())
    virtual = [
        rattler.GenericVirtualPackage(rattler.PackageName(n), rattler.Version(v), rattler.BuildString(b))
        for n, v, b in _TARGET_VIRTUAL_PACKAGES[platform]
    ]
    if timeout is not None and not timeout > 0:
        raise ConfigurationError(
            f"--timeout {timeout:g} is not a positive number of seconds", fix="give e.g. --timeout 600"
        )
    timeouts = (
        TIMEOUTS
        if timeout is None
        else Timeouts(connect=min(TIMEOUTS.connect, timeout), read=min(TIMEOUTS.read, timeout), total=timeout)
    )
    with (
        tempfile.TemporaryDirectory(prefix="flagtree-feedstock-relay-") as scratch,
        # rattler reads the extra channels from the toolkit's server on loopback only: no remote URL, no
        # credentials, no user's folder (index_relay.py); its cache of them is the run's own.
        serving(
            engine.channels, authorize=engine.authorize, scratch=Path(scratch), timeouts=timeouts
        ) as relay,
    ):
        extra = [rattler.Channel(url) for url in relay.urls]
        try:
            records = settled(
                rattler.solve(
                    [local, *extra],
                    match_specs,
                    gateway=rattler.Gateway(
                        cache_dir=Path(scratch) / "rattler-cache",
                        client=rattler.Client.from_config(rattler.Config.from_toml(relay.client_config())),
                    ),
                    platforms=[platform, "noarch"],
                    virtual_packages=virtual,
                )
            )
        except (errors.GatewayError, errors.FetchRepoDataError) as exc:
            relay.check()  # the relay's own line, not rattler's, when it refused or could not fetch
            raise _unreachable(exc, [str(channel_dir), *extra_channels], [local, *extra]) from None
        except errors.SolverError as exc:
            relay.check()
            raise _unsolvable(exc, channel_dir, specs, names, platform) from None
        relay.check()  # fail closed: a channel the relay could not read is never left out of a solve
        shown = {str(r.channel): relay.given(str(r.channel)) for r in records}
        for record in records:
            if not str(record.url).startswith("file://"):
                record.url = relay.upstream(str(record.url))  # fetched with the credentials of its origin
        _install(
            records,
            prefix,
            platform=platform,
            engine=engine,
            channel_dir=channel_dir,
            link_scripts=link_scripts,
            cache=cache or user_cache(os.environ),
        )
    return [
        InstalledPackage(
            name=r.name.normalized,
            version=str(r.version),
            build=str(r.build),
            channel=shown.get(str(r.channel), str(r.channel)),
        )
        for r in sorted(records, key=lambda r: r.name.normalized)
    ]


def _install(
    records: Sequence[Any],
    prefix: Path,
    *,
    platform: PlatformName,
    engine: EngineChannels,
    channel_dir: Path,
    link_scripts: LinkScriptPolicy,
    cache: Path,
) -> None:
    """Link ``records`` into ``prefix``, each remote one from a checked copy downloaded with ``engine``'s
    credentials for its origin (:mod:`.download`), none with link scripts ``link_scripts`` does not
    allow; a failure or a Ctrl-C leaves no half-installed prefix."""
    rattler = require("rattler", "py-rattler")
    errors = require("rattler.exceptions", "py-rattler")
    try:
        with tempfile.TemporaryDirectory(prefix="flagtree-feedstock-packages-") as scratch:
            # The installer installs the toolkit's own copies only (remote ones downloaded with the
            # credentials of their origin), and no package's link scripts but the allowed ones.
            runs_scripts = use_repacked_copies(
                records, Path(scratch), cache, authorize=engine.authorize, link_scripts=link_scripts
            )
            settled(
                rattler.install(
                    list(records),
                    prefix,
                    platform=rattler.Subdir(platform),
                    execute_link_scripts=runs_scripts,  # only the allowed packages carry any
                    show_progress=False,
                )
            )
    except (OSError, errors.InstallerError, errors.LinkError, errors.TransactionError, errors.IoError) as exc:
        with deferred_interrupts():
            shutil.rmtree(prefix, ignore_errors=True)
        raise ChannelError(
            f"installing into {prefix} failed: {_with_cause(exc)}",
            fix=f"check free disk space; if the packages of {channel_dir} changed since it was indexed, index it "
            f"again (flagtree-feedstock channel index {shell_word(channel_dir)})",
        ) from None
    except BaseException:  # a Ctrl-C: no half-installed prefix is left
        with deferred_interrupts():
            shutil.rmtree(prefix, ignore_errors=True)
        raise
