"""The model library: known files with their inspection, pairs with their last check, drafter
variants grouped under their drafter, and the built-in catalog of public pairs.

It lives in one SQLite file in the user's data folder (DFLASH_DATA_DIR, else the platform default;
see ``paths``). An inspection is cached under the file's path and reused only while the file's
size and mtime are unchanged, so editing or re-downloading a file invalidates it. The library
never moves a model file, and deletes only a file it made itself (a drafter variant, a converted
drafter: the ``made`` table) and only when asked: ``forget(path, delete_file=True)``.

What the library writes goes under the data folder (``variants/``, ``models/``), never next to the
source file: that may be the read-only install (the packaged app) or the repository checkout.

Each operation opens its own connection, so the GUI's worker threads and the CLI can share one
library file safely (SQLite serialises the writers).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tempfile
import time
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from . import compat
from ..common import sqlite_wal
from .convert_quant import quantize_drafter, variant_path
from ..common.errors import UnreadableModelError
from .modelinfo import DRAFTER_ROLES, ROLE_LORA, ModelInfo, inspect_model, signature
from ..common.resources import resource

#: The cache's version (PRAGMA user_version; version 1 kept it only in ``meta``). 2: inspections
#: carry ``value_problems`` (issue 32), so those cached before are dropped and made again.
SCHEMA_VERSION = 2
SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    role TEXT, arch TEXT, info TEXT, error TEXT, inspected_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS pairs (
    target TEXT NOT NULL, drafter TEXT NOT NULL, ok INTEGER NOT NULL, failures INTEGER NOT NULL,
    warnings INTEGER NOT NULL, report TEXT NOT NULL, checked_at REAL NOT NULL,
    PRIMARY KEY (target, drafter));
CREATE TABLE IF NOT EXISTS variants (
    path TEXT PRIMARY KEY, parent TEXT NOT NULL, kind TEXT NOT NULL, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS made (path TEXT PRIMARY KEY, what TEXT NOT NULL, created_at REAL NOT NULL);
"""


def _shown_path(p: Path) -> str:
    """The resolved path where there is one (a symlink loop has none: its own path then)."""
    try:
        return str(p.resolve())
    except (OSError, RuntimeError):
        return str(p.absolute())


def _migration_step(db, version: int) -> None:
    """From ``version`` to the next (run under sqlite_wal.migrate's lock)."""
    sqlite_wal.execute_script(db, SCHEMA)
    if version < 2:  # version 0/1 inspections lack value_problems: made again on demand
        db.execute("DELETE FROM files")
        db.execute("DELETE FROM pairs")
    db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))


class _NewerCache(Exception):
    pass


@dataclass
class LibraryFile:
    path: str
    role: str | None
    arch: str | None
    size: int
    info: ModelInfo | None
    error: str | None = None


@dataclass
class PairRecord:
    target: str
    drafter: str
    ok: bool
    failures: int
    warnings: int
    report: dict
    checked_at: float


@dataclass
class DrafterGroup:
    drafter: LibraryFile
    variants: list[tuple[str, str]] = field(default_factory=list)  # (path, kind: quant | lora)


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    title: str
    kind: str
    drafter_repo: str
    drafter_format: str
    target_repo: str
    target_gguf_repo: str | None
    target_gguf_search: str | None
    recommended_quants: tuple[str, ...]
    block_size: int | None
    notes: str
    source: str

    @classmethod
    def from_dict(cls, d: dict) -> "CatalogEntry":
        return cls(
            d["id"],
            d["title"],
            d["kind"],
            d["drafter_repo"],
            d.get("drafter_format", "hf"),
            d["target_repo"],
            d.get("target_gguf_repo"),
            d.get("target_gguf_search"),
            tuple(d.get("recommended_quants") or ()),
            d.get("block_size"),
            d.get("notes", ""),
            d.get("source", ""),
        )


def load_catalog(path: str | os.PathLike | None = None) -> list[CatalogEntry]:
    raw = json.loads(Path(path or resource("catalog.json")).read_text())
    return [CatalogEntry.from_dict(e) for e in raw["pairs"]]


class Library:
    def __init__(self, data_dir: str | os.PathLike | None = None):
        if data_dir is None:
            from ..common.paths import data_dir as default_data_dir

            data_dir = default_data_dir()
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.db_path = self.data_dir / "library.sqlite"
        self.models_dir = self.data_dir / "models"
        self.notices: list[str] = []  # what opening the cache had to do, for the user
        self._open()

    def _open(self) -> None:
        """Migrates the cache forward. It is only a cache: one SQLite cannot read is moved aside (never
        deleted) and rebuilt; one of a newer version is left alone and a private one used instead."""
        try:
            self._migrate()
        except sqlite3.OperationalError:
            raise  # locked, I/O: not proof of damage
        except sqlite3.DatabaseError as exc:
            aside = sqlite_wal.move_aside(self.db_path)
            self.notices.append(f"The library cache could not be read ({exc}); it was moved to {aside} and rebuilt.")
            self._migrate()
        except _NewerCache as exc:
            self.db_path = Path(tempfile.mkdtemp(prefix="dflash-library-")) / "library.sqlite"
            self.notices.append(f"{exc} It is left untouched; this session uses a fresh cache.")
            self._migrate()

    def _migrate(self) -> None:
        with closing(sqlite_wal.connect(self.db_path)) as db:
            sqlite_wal.quick_check(db)
            found = sqlite_wal.version(db)
            if found > SCHEMA_VERSION:
                raise _NewerCache(
                    f"The library cache {self.db_path} was written by a newer DFlash Studio "
                    f"(version {found}; this one reads up to {SCHEMA_VERSION})."
                )
            # at SCHEMA_VERSION nothing is written: opening stays a read (every inspection job opens one)
            sqlite_wal.migrate(db, SCHEMA_VERSION, _migration_step)

    @contextmanager
    def _db(self):
        with closing(sqlite_wal.connect(self.db_path)) as db:
            with db:  # one transaction
                yield db

    # -- files ------------------------------------------------------------------------------------
    def inspect(self, path: str | os.PathLike) -> ModelInfo:
        """The file's inspection, from the cache while size and mtime are unchanged."""
        try:
            key = str(Path(path).resolve())
            size, mtime = signature(key)
        except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Path.resolve before 3.13)
            raise UnreadableModelError(
                f"{path}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}", path
            ) from exc
        with self._db() as db:
            row = db.execute("SELECT size, mtime_ns, info, error FROM files WHERE path = ?", (key,)).fetchone()
        if row and row[0] == size and row[1] == mtime:
            if row[2]:
                return ModelInfo.from_record(json.loads(row[2]))
            raise UnreadableModelError(row[3] or f"{path}: unreadable", path)
        try:
            info = inspect_model(key)
        except UnreadableModelError as exc:
            self._store(key, size, mtime, None, str(exc))
            raise
        self._store(key, size, mtime, info, None)
        return info

    def _store(self, key, size, mtime, info: ModelInfo | None, error: str | None) -> None:
        with self._db() as db:
            db.execute(
                "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    size,
                    mtime,
                    info.role if info else None,
                    info.arch if info else None,
                    json.dumps(info.to_record()) if info else None,
                    error,
                    time.time(),
                ),
            )

    def add(self, path) -> ModelInfo:
        return self.inspect(path)

    def scan(self, folder: str | os.PathLike | None = None) -> list[LibraryFile]:
        """Adds every GGUF file and HF model folder under ``folder`` (default: the models folder)."""
        root = Path(folder) if folder else self.models_dir
        root.mkdir(parents=True, exist_ok=True)
        found: list[LibraryFile] = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            here = Path(dirpath)
            candidates = [here / f for f in sorted(filenames) if f.endswith(".gguf") and not f.startswith(".")]
            if "config.json" in filenames and any(f.endswith(".safetensors") for f in filenames):
                candidates.append(here)
            for p in candidates:
                try:
                    info = self.inspect(p)
                    found.append(LibraryFile(str(p.resolve()), info.role, info.arch, info.size_bytes, info))
                except UnreadableModelError as exc:
                    found.append(LibraryFile(_shown_path(p), None, None, 0, None, str(exc)))
        return found

    def files(self, role: str | None = None) -> list[LibraryFile]:
        with self._db() as db:
            rows = db.execute("SELECT path, role, arch, size, info, error FROM files ORDER BY path").fetchall()
        out = []
        for path, r, arch, size, info, error in rows:
            if role is not None and r != role and not (role == "drafter" and r in DRAFTER_ROLES):
                continue
            out.append(
                LibraryFile(path, r, arch, size, ModelInfo.from_record(json.loads(info)) if info else None, error)
            )
        return out

    def forget(self, path, delete_file: bool = False) -> bool:
        """Drops the file's rows. With ``delete_file``, a file the library made itself (``made_by_app``)
        is deleted from disk too; any other file is left alone. True when a file was deleted."""
        key = str(Path(path).resolve())
        deleted = False
        if delete_file and self.made_by_app(key):
            try:
                Path(key).unlink()
                deleted = True
            except FileNotFoundError:
                pass
        with self._db() as db:
            db.execute("DELETE FROM files WHERE path = ?", (key,))
            db.execute("DELETE FROM pairs WHERE target = ? OR drafter = ?", (key, key))
            db.execute("DELETE FROM variants WHERE path = ? OR parent = ?", (key, key))
            db.execute("DELETE FROM made WHERE path = ?", (key,))
        return deleted

    def record_made(self, path, what: str) -> None:
        """Notes that the app wrote this file (``what``: e.g. "q4_0 variant"), so Forget may delete it."""
        with self._db() as db:
            db.execute("INSERT OR REPLACE INTO made VALUES (?, ?, ?)", (str(Path(path).resolve()), what, time.time()))

    def made_by_app(self, path) -> str | None:
        """What the app made this file as ("q4_0 variant", ...), or None for a file it did not make."""
        with self._db() as db:
            row = db.execute("SELECT what FROM made WHERE path = ?", (str(Path(path).resolve()),)).fetchone()
        return row[0] if row else None

    # -- pairs ------------------------------------------------------------------------------------
    def check_pair(self, target, drafter, **kwargs) -> compat.CompatReport:
        """compat.check on cached inspections; the result is stored as the pair's last check."""
        t_key, d_key = str(Path(target).resolve()), str(Path(drafter).resolve())
        args: list = []
        for p in (t_key, d_key):
            try:
                args.append(self.inspect(p))
            except UnreadableModelError:
                args.append(p)  # compat reports it as unreadable
        report = compat.check(args[0], args[1], **kwargs)
        with self._db() as db:
            db.execute(
                "INSERT OR REPLACE INTO pairs VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    t_key,
                    d_key,
                    int(report.ok),
                    len(report.failures),
                    len(report.warnings),
                    json.dumps(report.to_dict()),
                    time.time(),
                ),
            )
        return report

    def pairs(self) -> list[PairRecord]:
        with self._db() as db:
            rows = db.execute("SELECT * FROM pairs ORDER BY checked_at DESC").fetchall()
        return [PairRecord(t, d, bool(ok), f, w, json.loads(r), at) for t, d, ok, f, w, r, at in rows]

    # -- variants ---------------------------------------------------------------------------------
    def add_variant(self, path, parent, kind: str) -> None:
        if kind not in ("quant", "lora"):
            raise ValueError("variant kind is 'quant' or 'lora'")
        self.inspect(path)
        with self._db() as db:
            db.execute(
                "INSERT OR REPLACE INTO variants VALUES (?, ?, ?, ?)",
                (str(Path(path).resolve()), str(Path(parent).resolve()), kind, time.time()),
            )

    def variant_dest(self, drafter, out_type: str) -> Path:
        """Where ``make_variant`` writes: ``variants/<folder>-<hash>/<name>-<type>.gguf`` in the data
        folder. The folder is named after the drafter's own folder plus a hash of its full path, so
        two drafters both called drafter.gguf get separate variants."""
        src = Path(drafter).resolve()
        tag = hashlib.sha1(str(src).encode()).hexdigest()[:8]
        return self.data_dir / "variants" / f"{src.parent.name or 'root'}-{tag}" / variant_path(src, out_type).name

    def make_variant(self, drafter, out_type: str, out: str | os.PathLike | None = None) -> Path:
        """Writes a quantised variant (under the data folder unless ``out`` says where) and files it
        under its drafter, as a file the app made."""
        dest = Path(out) if out else self.variant_dest(drafter, out_type)
        dest.parent.mkdir(parents=True, exist_ok=True)
        quantize_drafter(drafter, dest, out_type)
        self.add_variant(dest, drafter, "quant")
        self.record_made(dest, f"{out_type} variant")
        return dest

    def groups(self) -> list[DrafterGroup]:
        """Drafters with their variants: recorded ones, plus quantised copies of the same drafter
        (same shapes, layers, tokenizer) and LoRA adapters whose tensors fit it."""
        files = self.files()
        drafters = [f for f in files if f.role in DRAFTER_ROLES and f.info is not None]
        with self._db() as db:
            recorded = db.execute("SELECT path, parent, kind FROM variants").fetchall()
        parent_of = {p: (parent, kind) for p, parent, kind in recorded}
        by_identity: dict[tuple, list[LibraryFile]] = {}
        for f in drafters:
            assert f.info is not None
            by_identity.setdefault(_identity(f.info), []).append(f)
        groups: dict[str, DrafterGroup] = {}
        for same in by_identity.values():
            # The most precise copy heads the group (F32/BF16/F16 before quantised ones).
            same.sort(key=lambda f: (-_precision(f.info) if f.info else 0, f.path))
            head = same[0]
            if head.path in parent_of:
                continue
            g = groups.setdefault(head.path, DrafterGroup(head))
            g.variants += [(f.path, "quant") for f in same[1:] if f.path not in parent_of]
        for path, (parent, kind) in parent_of.items():
            if parent in groups:
                groups[parent].variants.append((path, kind))
        for lora in (f for f in files if f.role == ROLE_LORA and f.info is not None and f.path not in parent_of):
            for g in groups.values():
                if compat._lora(lora.info, g.drafter.info).status == compat.PASS:
                    g.variants.append((lora.path, "lora"))
        for g in groups.values():
            g.variants = sorted(set(g.variants))
        return sorted(groups.values(), key=lambda g: g.drafter.path)

    # -- catalog ----------------------------------------------------------------------------------
    @staticmethod
    def catalog() -> list[CatalogEntry]:
        return load_catalog()


def _identity(info: ModelInfo) -> tuple:
    return (
        info.arch,
        info.n_embd,
        info.n_layer,
        info.n_head,
        info.n_head_kv,
        info.head_dim,
        info.n_ff,
        info.target_layers,
        info.fc_in,
        info.tokens_hash,
        info.block_size,
        info.dspark,
    )


def _precision(info: ModelInfo) -> int:
    rank = {"F32": 4, "BF16": 3, "F16": 3, "Q8_0": 2}
    matrices = {k: v for k, v in info.quant_types.items() if k != "F32"} or info.quant_types
    return min((rank.get(k, 1) for k in matrices), default=0)
