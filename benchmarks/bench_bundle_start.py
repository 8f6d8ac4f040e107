"""From the bundle file to a usable window (issue 34): how long the one-file bundle takes to show the app.

Each run starts the bundle (``make package``'s .run) with no argument, as a double-click does, in a
clean environment (``env -i``: a HOME of its own, PATH=/usr/bin:/bin, an Xvfb display, Qt's xcb
platform), and polls the X server every 20 ms until a top-level window named "DFlash Studio" is
viewable (``xwininfo``: mapped and shown, with the first-start offer in it); then the app is stopped.

* cold: a new, empty HOME each run, so the bundle first unpacks itself into
  ~/.cache/dflash-studio/bundle/<id>/ (what a user's first double-click costs);
* warm: the same HOME again (unpacked already: every later start).

Cold and warm runs alternate, so both see the same machine load.

    .venv/bin/python benchmarks/bench_bundle_start.py dist/dflash-studio-*.run --runs 5
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

TITLE = "DFlash Studio"


def start_xvfb(log: Path) -> tuple[subprocess.Popen, str]:
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "1600x1000x24", "-nolisten", "tcp", "-noreset"],
        pass_fds=(write_fd,),
        stdout=subprocess.DEVNULL,
        stderr=open(log, "wb"),
    )
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        number = f.readline().strip()
    if not number.isdigit():
        raise SystemExit(f"Xvfb did not start: {log.read_text()[-500:]}")
    return proc, f":{number}"


def viewable_window(display: str) -> bool:
    env = {"DISPLAY": display, "PATH": "/usr/bin:/bin"}
    tree = subprocess.run(["xwininfo", "-root", "-tree"], env=env, capture_output=True, text=True).stdout
    for line in tree.splitlines():
        if f'"{TITLE}' in line:
            wid = line.split()[0]
            info = subprocess.run(["xwininfo", "-id", wid], env=env, capture_output=True, text=True).stdout
            if "Map State: IsViewable" in info:
                return True
    return False


def one_start(bundle: Path, home: Path, display: str, timeout_s: float = 120.0) -> float:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "DISPLAY": display, "QT_QPA_PLATFORM": "xcb"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [str(bundle)], env=env, cwd=home, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        while time.perf_counter() - t0 < timeout_s:
            if viewable_window(display):
                return time.perf_counter() - t0
            if proc.poll() is not None:
                raise SystemExit(f"the app exited ({proc.returncode}): {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.02)
        raise SystemExit(f"no window after {timeout_s} s")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    bundle = args.bundle.resolve()
    work = Path(tempfile.mkdtemp(prefix="dflash-bundle-start-"))
    xvfb, display = start_xvfb(work / "xvfb.log")
    cold, warm = [], []
    try:
        for i in range(args.runs):
            home = work / f"home{i}"
            home.mkdir()
            cold.append(one_start(bundle, home, display))
            warm.append(one_start(bundle, home, display))
            print(f"run {i + 1}: cold {cold[-1]:.2f} s, warm {warm[-1]:.2f} s", flush=True)
    finally:
        xvfb.terminate()
        xvfb.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    size = bundle.stat().st_size
    print(
        f"bundle {bundle.name}: {size / 2**20:.1f} MiB; {os.cpu_count()} cores, {platform.processor() or platform.machine()}"
    )
    print(
        f"cold start (unpack + window): median {statistics.median(cold):.2f} s, min {min(cold):.2f}, max {max(cold):.2f}"
    )
    print(
        f"warm start (window):          median {statistics.median(warm):.2f} s, min {min(warm):.2f}, max {max(warm):.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
