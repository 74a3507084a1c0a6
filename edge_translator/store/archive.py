"""A bundle as one ``.tar`` file (``models pack``), and such a file unpacked safely (``models add``).

The archive holds one folder, the bundle's name, with ``bundle.json``, the files it lists
and the model card. Unpacking takes only those: every member must be a plain file whose
name its ``bundle.json`` lists (or the manifest, or ``README.md``), with no path outside
the folder, no link and no device, and the whole bundle is verified against its
checksums before anyone can use it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from ..core import diskspace, durable
from ..core.bundle import MANIFEST, load_bundle
from ..core.errors import BundleError

logger = logging.getLogger(__name__)

#: The model card beside the manifest; packed when present.
CARD = "README.md"
#: Largest manifest read from an archive, and largest archive member.
MAX_MANIFEST_BYTES = 16 << 20
MAX_MEMBER_BYTES = 16 << 30
#: Suffixes of the archives ``models add`` unpacks.
SUFFIXES = (".tar", ".tar.gz", ".tgz")


class ArchiveError(BundleError):
    """A packed bundle that is malformed, unsafe or incomplete (exit code 3, as a corrupt bundle)."""


def is_archive(path: Path) -> bool:
    """Whether ``path`` is named like a packed bundle."""
    return path.name.lower().endswith(SUFFIXES)


def bundle_members(bundle_dir: Path) -> list[str]:
    """The files a packed bundle holds: the manifest, the files it lists and the card."""
    bundle = load_bundle(bundle_dir)  # a corrupt bundle is never packed
    names = [MANIFEST, *bundle.manifest["files"]]
    if (bundle_dir / CARD).is_file() and CARD not in names:
        names.append(CARD)
    return names


def pack(bundle_dir: Path, out: Path, force: bool = False,
         progress: Callable[[int, int], None] | None = None) -> Path:
    """Write ``bundle_dir`` into the tar file ``out`` (written beside it and renamed when whole).

    Args:
        bundle_dir: A bundle directory; verified first.
        out: The ``.tar`` file to write.
        force: Replace ``out`` if it exists.
        progress: Called with (bytes written, total bytes).

    Raises:
        BundleError: If the bundle is corrupt.
        ArchiveError: If ``out`` exists without ``force`` or cannot be written.
        NoSpace: If its disk is full (no partial file is left).
    """
    bundle_dir, out = Path(bundle_dir), Path(out)
    if not out.name.lower().endswith(".tar"):
        raise ArchiveError(f"{out}: a packed bundle is a .tar file; name it {out.name}.tar")
    if out.exists() and not force:
        raise ArchiveError(f"{out} exists; pass --force to replace it")
    names = bundle_members(bundle_dir)
    total = sum((bundle_dir / n).stat().st_size for n in names)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.part")
    done = 0
    try:
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
            for name in names:
                info = tar.gettarinfo(str(bundle_dir / name), arcname=f"{bundle_dir.name}/{name}")
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                with open(bundle_dir / name, "rb") as handle:
                    tar.addfile(info, handle)
                done += info.size
                if progress:
                    progress(done, total)
        durable.replace(tmp, out)  # fsynced, renamed, its folder fsynced
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if diskspace.is_full(exc):
            raise diskspace.no_space(out, "free some space and run the same command again") from None
        raise ArchiveError(f"{out} could not be written ({exc.strerror or exc}); choose another place") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    logger.info("packed %s into %s (%d files, %.1f MB)", bundle_dir, out, len(names), total / 1e6)
    return out


def _member_name(member: tarfile.TarInfo, where: Path) -> tuple[str, str]:
    """``(folder, file)`` of a member, or an :class:`ArchiveError` if it is not a plain file in one folder."""
    path = PurePosixPath(member.name)
    if member.name.startswith(("/", "\\")) or any(p in ("..", "") for p in path.parts) or "\\" in member.name:
        raise ArchiveError(f"{where}: the archive member {member.name!r} points outside its folder; "
                           "refusing the archive")
    if member.isdir() and len(path.parts) == 1:
        return path.parts[0], ""
    if not member.isreg():
        raise ArchiveError(f"{where}: the archive member {member.name!r} is not a plain file (a link or a "
                           "device); refusing the archive")
    if len(path.parts) != 2:
        raise ArchiveError(f"{where}: the archive member {member.name!r} is not a file of the bundle's folder; "
                           "a packed bundle holds one folder of files (`edge-translator models pack`)")
    if member.size > MAX_MEMBER_BYTES:
        raise ArchiveError(f"{where}: the archive member {member.name!r} claims {member.size} bytes; refusing it")
    return path.parts[0], path.parts[1]


def unpack(archive: Path, into: Path, progress: Callable[[int, int], None] | None = None) -> Path:
    """Unpack a packed bundle into the new directory ``into`` and verify it.

    Args:
        archive: A ``.tar`` (or ``.tar.gz``) made by :func:`pack`.
        into: A directory that does not exist yet; created, and left complete or not at all.
        progress: Called with (bytes unpacked, total bytes).

    Returns:
        ``into``, holding a verified bundle.

    Raises:
        ArchiveError: For an archive that cannot be read, or holds anything but the bundle's files.
        BundleError: If the unpacked files do not match their checksums.
    """
    archive, into = Path(archive), Path(into)
    try:
        tar = tarfile.open(archive, "r:*")
    except FileNotFoundError:
        raise ArchiveError(f"{archive} does not exist") from None
    except (tarfile.TarError, OSError, EOFError) as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0].rstrip(":")
        raise ArchiveError(f"{archive} is not a readable tar archive ({reason}); download or copy it again") from None
    into.mkdir(parents=True)
    try:
        with tar:
            try:
                members = tar.getmembers()
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise ArchiveError(f"{archive} is truncated or corrupt ({exc}); download or copy it again") from None
            named = [(*_member_name(member, archive), member) for member in members]
            folders = {folder for folder, _, _ in named}
            if len(folders) != 1:
                raise ArchiveError(f"{archive} holds {len(folders)} folders; a packed bundle holds exactly one")
            files = {}
            for _, name, member in named:
                if name in files:
                    raise ArchiveError(f"{archive}: {name} appears twice in the archive; refusing it")
                if name:
                    files[name] = member
            listed = _listed_files(tar, files, archive)
            extra = sorted(set(files) - listed - {MANIFEST, CARD})
            if extra:
                raise ArchiveError(f"{archive} holds {extra[0]}, which its {MANIFEST} does not list; refusing it")
            missing = sorted(listed - set(files))
            if missing:
                raise ArchiveError(f"{archive} lacks {missing[0]}, which its {MANIFEST} lists; the archive is "
                                   "incomplete, download or pack it again")
            total, done = sum(m.size for m in files.values()), 0
            for name, member in files.items():
                done += _extract(tar, member, into / name, archive)
                if progress:
                    progress(done, total)
        load_bundle(into)  # every checksum, before anything is installed
    except ArchiveError:
        shutil.rmtree(into, ignore_errors=True)
        raise
    except BundleError as exc:  # a checksum: say which archive it came from
        shutil.rmtree(into, ignore_errors=True)
        raise ArchiveError(f"{archive}: {exc}") from None
    except BaseException:
        shutil.rmtree(into, ignore_errors=True)
        raise
    return into


def _listed_files(tar: tarfile.TarFile, files: dict, archive: Path) -> set[str]:
    """The file names the archive's manifest lists (each a plain name: bundles are flat)."""
    member = files.get(MANIFEST)
    if member is None:
        raise ArchiveError(f"{archive} holds no {MANIFEST}: it is not a packed bundle")
    if member.size > MAX_MANIFEST_BYTES:
        raise ArchiveError(f"{archive}: its {MANIFEST} claims {member.size} bytes; refusing it")
    try:
        manifest = json.loads(tar.extractfile(member).read())
        listed = set(manifest["files"])
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ArchiveError(f"{archive} is truncated or corrupt ({exc}); download or copy it again") from None
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ArchiveError(f"{archive}: its {MANIFEST} is not a bundle manifest with a 'files' list") from None
    odd = sorted(n for n in listed if not isinstance(n, str) or PurePosixPath(n).name != n or n in ("", ".", ".."))
    if odd:
        raise ArchiveError(f"{archive}: its {MANIFEST} lists {odd[0]!r}, which is not a file of the bundle's folder")
    return listed


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path, archive: Path) -> int:
    """Copy one member's bytes to ``dest``; its length, checked against the header."""
    written = 0
    try:
        source = tar.extractfile(member)
        with open(dest, "xb") as out:
            while chunk := source.read(1 << 20):
                written += len(chunk)
                if written > member.size:
                    break
                out.write(chunk)
    except (tarfile.TarError, EOFError) as exc:
        raise ArchiveError(f"{archive} is truncated or corrupt at {member.name} ({exc}); download or copy it "
                           "again") from None
    if written != member.size:
        raise ArchiveError(f"{archive} is truncated at {member.name} ({written} of {member.size} bytes); download "
                           "or copy it again")
    return written
