"""Model files that change under the app: between the pairing check and llama.cpp's load, and on
a disk that fills up during a download.

Check-to-load: Engine.load reports "loading target/drafter" through its progress callback after
the check and right before each load; the child process below changes the file at that moment
(replaced by a drafter whose target layer ids are out of range -- which made llama.cpp abort the
whole process at the first decode --, deleted, or rewritten in place). It runs in a child so that
a regression kills the child, not the test runner.

Full disk: a download in a child process whose file-size limit (RLIMIT_FSIZE, with SIGXFSZ
ignored) is below the file's size, which works as any user; and, where mounting is allowed (root,
as in CI), a real 4 MiB tmpfs filled up while the transfer runs. The user must be told the disk is
full, the partial file must stay for a resume, earlier downloads must stay intact, and after space
is freed the same call must finish and verify.

Run as a script, this file is the check-to-load child:
    python fault_files.py load TARGET DRAFTER BAD_DRAFTER ACTION
and the size-limited download child:
    python fault_files.py download MODELS REPO FILE LIMIT_BYTES
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from fault_outcomes import RECOVERED, REFUSED, Outcome

ROOT = Path(__file__).resolve().parents[2]
ACTIONS = {
    # action -> (the progress message it waits for, what the user must read)
    "drafter-swapped": ("loading drafter", "changed after the pairing check"),
    "target-deleted": ("loading target", "moved or deleted after the pairing check"),
    "target-rewritten": ("loading target", "changed after the pairing check"),
}


# ------------------------------------------------------------------------------------------------
# children


def load_child(target: str, drafter: str, bad: str, action: str) -> dict:
    from engine_bridge.runtime.config import EngineConfig, GenerationSettings
    from engine_bridge.runtime.engine import Engine
    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

    wait_for, _ = ACTIONS[action]

    def progress(msg: str) -> None:
        if not msg.startswith(wait_for):
            return
        if action == "drafter-swapped":
            os.replace(bad, drafter)
        elif action == "target-deleted":
            os.unlink(target)
        elif action == "target-rewritten":  # same inode, new bytes (an editor saving in place)
            data = Path(target).read_bytes()
            with open(target, "r+b") as f:
                f.write(data[:64] + bytes(16) + data[80:96])

    try:
        eng = Engine.load(
            EngineConfig(target=target, draft=drafter, n_ctx=256), progress=progress, preflight=PAIR_PREFLIGHT
        )
    except Exception as exc:  # noqa: BLE001 - the parent judges it
        return {"error": type(exc).__name__, "message": str(exc)}
    res = eng.generate("Hello", GenerationSettings(mode="chain", max_tokens=8))
    eng.close()
    return {"loaded": True, "tokens": len(res.tokens)}


def download_child(models: str, repo: str, filename: str, limit: int) -> dict:
    import resource
    import signal

    from engine_bridge.models import hub

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death when the limit is reached
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        path = hub.download_file(repo, filename, models)
    except Exception as exc:  # noqa: BLE001 - the parent judges it
        return {"error": type(exc).__name__, "message": str(exc)}
    return {"path": str(path)}


def _run_child(*args, env: dict | None = None, timeout: float = 120) -> tuple[dict, subprocess.CompletedProcess]:
    cmd = [sys.executable, __file__, *map(str, args)]
    full_env = dict(os.environ, **(env or {}))
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(Path(__file__).parent)])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=full_env)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    return (json.loads(lines[-1]) if lines else {}), r


# ------------------------------------------------------------------------------------------------
# check-to-load cases


def bad_drafter(drafter: Path, target: Path, dst: Path) -> Path:
    """The drafter with a target layer id one past the target's last layer: passes nothing in
    the check, and aborts llama.cpp at the first decode when loaded unchecked."""
    from engine_bridge.models.gguf_header import read_header

    from modelfiles import rewrite_gguf

    t = read_header(target)
    n_layer = int(t.fields[f"{t.fields['general.architecture']}.block_count"])
    return rewrite_gguf(drafter, dst, set_arrays={"dflash.target_layers": [1, n_layer]})


def case_changed_before_load(target: Path, drafter: Path, workdir: Path, action: str) -> Outcome:
    work = Path(tempfile.mkdtemp(dir=workdir))
    t, d = work / "target.gguf", work / "drafter.gguf"
    shutil.copyfile(target, t)
    shutil.copyfile(drafter, d)
    bad = bad_drafter(drafter, target, work / "bad-drafter.gguf")
    originals = {p: p.read_bytes() for p in (target, drafter)}
    out, r = _run_child("load", t, d, bad, action)
    assert r.returncode == 0, f"{action}: the process died ({r.returncode}): {r.stderr[-1500:]}"
    assert out.get("error") == "ModelChangedError", f"{action}: {out or r.stderr[-1500:]}"
    says = ACTIONS[action][1]
    assert says in out["message"] and "nothing was loaded" in out["message"], out["message"]
    # the check only ever reads: the user's own files are untouched
    assert all(p.read_bytes() == data for p, data in originals.items())
    return Outcome(f"model file {action} between check and load", REFUSED, out["message"])


# ------------------------------------------------------------------------------------------------
# full disk


def case_file_size_limit(hub_url: str, models: Path, repo: str, filename: str, size: int, keep: Path) -> Outcome:
    """A download in a process whose file-size limit is a third of the file."""
    from engine_bridge.models import hub

    limit = size // 3
    env = {"HF_ENDPOINT": hub_url, "HF_HOME": str(models.parent / "hf-home"), "HF_TOKEN": ""}
    out, r = _run_child("download", models, repo, filename, limit, env=env)
    assert r.returncode == 0, r.stderr[-1500:]
    assert out.get("error") == "DiskFullError", out or r.stderr[-1500:]
    assert "file-size limit was reached" in out["message"] and "run again to resume" in out["message"], out["message"]
    dest = models / repo / filename
    part = dest.with_name(dest.name + ".part")
    assert not dest.exists() and 0 < part.stat().st_size <= limit
    assert hub.local_record(keep) is not None, "an earlier download was harmed"
    path = hub.download_file(repo, filename, models)  # no limit now: it resumes and verifies
    assert hub.local_record(path)["verified"] == "sha256"
    return Outcome("file-size limit during download", RECOVERED, out["message"])


def mount_tmpfs(where: Path, size: str = "4m") -> bool:
    """A real small filesystem (root only; False where mounting is not allowed)."""
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    return r.returncode == 0


def unmount(where: Path) -> None:
    subprocess.run(["umount", str(where)], capture_output=True)


def case_full_tmpfs(small: Path, repo: str, filename: str, size: int, small_file: str) -> Outcome:
    """On a 4 MiB tmpfs: the disk fills up while the transfer runs (another file takes the space)."""
    from engine_bridge.models import hub

    models = small / "models"
    keep = hub.download_file(repo, small_file, models)  # an earlier download that must survive
    filler = small / "filler.bin"

    def fill_up(p):
        if not filler.exists():
            free = shutil.disk_usage(small).free
            with open(filler, "wb") as f:
                try:
                    f.write(b"\0" * max(free - 64 * 1024, 0))
                except OSError:
                    pass

    try:
        try:
            hub.download_file(repo, filename, models, progress=fill_up)
        except hub.DiskFullError as exc:
            msg = str(exc)
        else:
            raise AssertionError("the download finished on a full disk")
        assert "the disk is full" in msg and "run again to resume" in msg, msg
        dest = models / repo / filename
        assert not dest.exists() and dest.with_name(dest.name + ".part").exists()
        assert hub.local_record(keep) is not None, "an earlier download was harmed"
        # before any byte: not enough room at all
        try:
            hub.download_file(repo, filename, models)
        except hub.DiskFullError as exc:
            early = str(exc)
        else:
            raise AssertionError("the download started without room")
        assert "MiB are free" in early, early
    finally:
        filler.unlink(missing_ok=True)
    path = hub.download_file(repo, filename, models)  # space freed: it resumes and verifies
    assert hub.local_record(path)["verified"] == "sha256"
    return Outcome("full disk (tmpfs) during download", RECOVERED, msg, figures={"before_start": early})


if __name__ == "__main__":
    kind, args = sys.argv[1], sys.argv[2:]
    if kind == "load":
        print(json.dumps(load_child(*args)), flush=True)
    elif kind == "download":
        print(json.dumps(download_child(args[0], args[1], args[2], int(args[3]))), flush=True)
    else:
        raise SystemExit(f"unknown child {kind!r}")
