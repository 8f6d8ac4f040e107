"""kill -9 while the app's stores are written: the conversation store (app/chat/conversations.py) and
the model library (engine_bridge/models/library.py), each real SQLite in a real child process.

A writer child acknowledges on stdout each write *after* it returned (the transaction committed);
the parent kills it with SIGKILL at a random moment, then reopens the store and checks that it
opens, passes ``PRAGMA integrity_check``, is in WAL mode, and holds every acknowledged write.
A write that committed but whose acknowledgement the kill cut off may be there too; an
acknowledged one missing (or older than acknowledged) counts as lost.

Run as a script, this file is the writer child:
    python fault_store.py conversations DB SEED [OPS]
    python fault_store.py library DATA_DIR MODEL_DIR SEED [OPS]
(OPS: stop after that many writes; default: until killed).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from fault_outcomes import RECOVERED, Outcome

ROOT = Path(__file__).resolve().parents[2]
#: An assistant answer grows by this much per streamed update, up to ANSWER_STEPS updates.
ANSWER_CHUNK = "token " * 8
ANSWER_STEPS = 6


def answer_text(conv_seq: int, steps: int) -> str:
    return f"answer {conv_seq}: " + ANSWER_CHUNK * steps


# ------------------------------------------------------------------------------------------------
# writer children


def _ack(**rec) -> None:
    rec["t"] = time.time()
    sys.stdout.write(json.dumps(rec) + "\n")
    sys.stdout.flush()


def conversations_writer(db: str, seed: int, ops: int | None) -> None:
    """What the chat does: a conversation, the user's turn, the answer streamed in updates."""
    from app.chat.conversations import ConversationStore, Message

    rng = random.Random(seed)
    store = ConversationStore(db)
    _ack(op="ready", pid=os.getpid())
    n = 0
    seq = 0
    while ops is None or n < ops:
        seq += 1
        tag = f"{seed}-{seq}"
        cid = store.create()
        _ack(op="conversation", id=cid)
        user = Message("user", f"question {tag}: " + "word " * rng.randint(1, 40))
        store.add(cid, user)
        _ack(op="add", id=user.id, conv=cid, role="user", content=user.content)
        answer = Message("assistant", answer_text(seq, 0), tokens=[("answer", "target", 0)], steps={0: (0, 0, 1)})
        store.add(cid, answer)
        _ack(
            op="add",
            id=answer.id,
            conv=cid,
            role="assistant",
            content=answer.content,
            final=answer_text(seq, ANSWER_STEPS),
        )
        for k in range(1, ANSWER_STEPS + 1):
            answer.content = answer_text(seq, k)
            answer.tokens.append(("token", "draft" if k % 2 else "target", k))
            answer.steps[k] = (4, k % 4, 1 + k % 4)
            store.update(answer)
            _ack(op="update", id=answer.id, content=answer.content)
        n += 1


def library_writer(data_dir: str, model_dir: str, seed: int, ops: int | None) -> None:
    """What the library does while models change on disk: re-inspections and pair checks."""
    from engine_bridge.models.library import Library

    rng = random.Random(seed)
    lib = Library(data_dir)
    models = sorted(Path(model_dir).glob("*.gguf"))
    targets = [m for m in models if "target" in m.name]
    drafters = [m for m in models if "drafter" in m.name]
    _ack(op="ready", pid=os.getpid())
    n = 0
    while ops is None or n < ops:
        path = rng.choice(models)
        # A new mtime invalidates the cached inspection, so inspect() rewrites the file's row.
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        info = lib.inspect(path)
        _ack(op="inspect", path=str(path.resolve()), role=info.role)
        t, d = rng.choice(targets), rng.choice(drafters)
        report = lib.check_pair(t, d)
        _ack(op="pair", target=str(t.resolve()), drafter=str(d.resolve()), ok=report.ok)
        n += 1


# ------------------------------------------------------------------------------------------------
# the parent side


def start_writer(kind: str, *args, ops: int | None = None) -> subprocess.Popen:
    cmd = [sys.executable, __file__, kind, *map(str, args)] + ([str(ops)] if ops is not None else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(Path(__file__).parent)]))
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env, text=True)


def read_acks(proc: subprocess.Popen) -> list[dict]:
    """Every complete acknowledgement line (a line the kill cut in half was never acknowledged)."""
    out = proc.stdout.read()
    acks = []
    for line in out.split("\n"):
        try:
            acks.append(json.loads(line))
        except ValueError:
            pass
    return acks


def wait_ready(proc: subprocess.Popen, timeout: float = 60.0) -> None:
    line = proc.stdout.readline()
    if not line or json.loads(line).get("op") != "ready":
        proc.kill()
        raise AssertionError(f"the writer did not start: {proc.stderr.read()[-2000:]}")


def kill_at_random(proc: subprocess.Popen, rng: random.Random, max_delay: float) -> float:
    wait_ready(proc)
    delay = rng.uniform(0.0, max_delay)
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return delay


def db_health(path: Path) -> tuple[str, str]:
    """(integrity_check, journal_mode) of the file, read with a plain sqlite3 connection."""
    db = sqlite3.connect(path, timeout=30)
    try:
        return db.execute("PRAGMA integrity_check").fetchone()[0], db.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        db.close()


def check_conversations(db: Path, acks: list[dict]) -> int:
    """Opens the store as the app does; returns how many acknowledged writes are missing."""
    from app.chat.conversations import ConversationStore

    integrity, mode = db_health(db)
    assert integrity == "ok", f"integrity_check: {integrity}"
    assert mode == "wal", f"journal mode {mode}"
    store = ConversationStore(db)
    try:
        convs = {c.id for c in store.list()}
        stored = {}
        for cid in convs:
            for m in store.messages(cid):
                stored[m.id] = (cid, m)
        latest: dict[int, dict] = {}
        lost = 0
        for a in acks:
            if a["op"] == "conversation":
                lost += a["id"] not in convs
            elif a["op"] == "add":
                latest[a["id"]] = a
            elif a["op"] == "update":
                latest[a["id"]] = {**latest.get(a["id"], {}), **a}
        for mid, a in latest.items():
            if mid not in stored:
                lost += 1
                continue
            cid, m = stored[mid]
            final = a.get("final", a["content"])
            # as acknowledged, or a later update that committed just before the kill
            if cid != a.get("conv", cid) or not (m.content.startswith(a["content"]) and final.startswith(m.content)):
                lost += 1
        return lost
    finally:
        store.close()


def check_library(data_dir: Path, acks: list[dict]) -> int:
    from engine_bridge.models.library import Library

    integrity, mode = db_health(Path(data_dir) / "library.sqlite")
    assert integrity == "ok", f"integrity_check: {integrity}"
    assert mode == "wal", f"journal mode {mode}"
    lib = Library(data_dir)
    files = {f.path: f for f in lib.files()}
    pairs = {(p.target, p.drafter) for p in lib.pairs()}
    lost = 0
    for a in acks:
        if a["op"] == "inspect":
            f = files.get(a["path"])
            lost += f is None or f.role != a["role"] or f.info is None
        elif a["op"] == "pair":
            lost += (a["target"], a["drafter"]) not in pairs
    return lost


def library_models(folder: Path) -> Path:
    """Copies of the shipped pair's headers' owners: two targets and two drafters the writer touches."""
    from engine_bridge.models.demo import demo_pair, shipped_pair

    target, drafter = shipped_pair() or demo_pair()
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(2):
        for src, name in ((target, f"target-{i}.gguf"), (drafter, f"drafter-{i}.gguf")):
            dst = folder / name
            if not dst.exists():
                dst.write_bytes(src.read_bytes())
    return folder


def kill_conversations_case(db: Path, seed: int, max_delay: float = 0.4) -> Outcome:
    """One kill -9 of a conversation writer on ``db`` (which may hold earlier rounds' rows)."""
    rng = random.Random(seed)
    proc = start_writer("conversations", db, seed)
    delay = kill_at_random(proc, rng, max_delay)
    acks = read_acks(proc)
    lost = check_conversations(db, acks)
    return Outcome(
        f"kill conversations #{seed}",
        RECOVERED,
        f"killed after {delay:.2f}s, {len(acks)} acknowledged",
        lost=lost,
        figures={"acks": len(acks)},
    )


def kill_library_case(data_dir: Path, model_dir: Path, seed: int, max_delay: float = 0.6) -> Outcome:
    rng = random.Random(seed)
    proc = start_writer("library", data_dir, model_dir, seed)
    delay = kill_at_random(proc, rng, max_delay)
    acks = read_acks(proc)
    lost = check_library(data_dir, acks)
    return Outcome(
        f"kill library #{seed}",
        RECOVERED,
        f"killed after {delay:.2f}s, {len(acks)} acknowledged",
        lost=lost,
        figures={"acks": len(acks)},
    )


def two_writers_case(kind: str, store: Path, model_dir: Path | None, ops: int, seed: int = 0) -> Outcome:
    """Two processes write one store at once, to the end: both finish, nothing is lost."""
    extra = [model_dir] if kind == "library" else []
    procs = [start_writer(kind, store, *extra, seed + i, ops=ops) for i in range(2)]
    acks, errors, spans = [], [], []
    for p in procs:
        out, err = p.communicate(timeout=300)
        if p.returncode != 0:
            errors.append(err.strip().splitlines()[-1] if err.strip() else f"exit {p.returncode}")
        mine = [a for a in map(json.loads, filter(str.strip, out.splitlines())) if a["op"] != "ready"]
        spans.append((mine[0]["t"], mine[-1]["t"]) if mine else (0.0, 0.0))
        acks += mine
    assert not errors, f"a writer failed: {errors}"
    overlap = min(spans[0][1], spans[1][1]) - max(spans[0][0], spans[1][0])
    assert overlap > 0, "the two writers never wrote at the same time: raise ops"
    lost = check_conversations(store, acks) if kind == "conversations" else check_library(store, acks)
    return Outcome(
        f"two {kind} writers",
        RECOVERED,
        f"{len(acks)} writes acknowledged, {overlap:.2f}s at once",
        lost=lost,
        figures={"acks": len(acks), "overlap_s": overlap},
    )


if __name__ == "__main__":
    kind, args = sys.argv[1], sys.argv[2:]
    if kind == "conversations":
        conversations_writer(args[0], int(args[1]), int(args[2]) if len(args) > 2 else None)
    elif kind == "library":
        library_writer(args[0], args[1], int(args[2]), int(args[3]) if len(args) > 3 else None)
    else:
        raise SystemExit(f"unknown writer {kind!r}")
