"""Fixtures for the hub tests: a local Hub stand-in serving real files, with HF_ENDPOINT at it."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import constants

from tests.hub.hub_stand_in import HubStandIn, StandInFile, StandInRepo

GGUF_REPO = "test-org/SmolLM2-135M-Instruct-GGUF"
GGUF_FILE = "SmolLM2-135M-Instruct-Q4_1.gguf"
ST_REPO = "test-org/tiny-llama-safetensors"
GATED_REPO = "gated-org/Gated-Model-GGUF"
PRIVATE_REPO = "private-org/Private-Model-GGUF"
CORRUPT_REPO = "test-org/Corrupt-GGUF"
SPLIT_REPO = "test-org/Split-GGUF"
SPLIT_FILES = [f"big-Q8_0-{i:05d}-of-00003.gguf" for i in (1, 2, 3)]
VISION_REPO = "test-org/Tiny-Vision-GGUF"
VISION_FILES = ["vision-Q4_1.gguf", "mmproj-vision-Q8_0.gguf", "mmproj-vision-f16.gguf"]
GRANTED_TOKEN = "hf_granted_token"


def make_tiny_safetensors(path: Path, n_embd: int = 16, n_vocab: int = 32, n_layer: int = 2) -> int:
    """Write a small llama-shaped .safetensors file by hand; returns its parameter count."""
    shapes: dict[str, list[int]] = {"model.embed_tokens.weight": [n_vocab, n_embd]}
    for il in range(n_layer):
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            shapes[f"model.layers.{il}.self_attn.{name}.weight"] = [n_embd, n_embd]
        shapes[f"model.layers.{il}.input_layernorm.weight"] = [n_embd]
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    payload = bytearray()
    params = 0
    for i, (name, shape) in enumerate(shapes.items()):
        n = 1
        for d in shape:
            n *= d
        params += n
        data = struct.pack(f"<{n}e", *[((i + j) % 7 - 3) / 8 for j in range(n)])  # F16
        header[name] = {
            "dtype": "F16",
            "shape": shape,
            "data_offsets": [offset, offset + len(data)],
        }
        payload += data
        offset += len(data)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(payload))
    return params


@pytest.fixture(scope="session")
def tiny_safetensors(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    path = tmp_path_factory.mktemp("st") / "model.safetensors"
    params = make_tiny_safetensors(path)
    return path, params


@pytest.fixture(scope="session")
def hub_server(smollm2_path: Path, tiny_safetensors: tuple[Path, int]) -> Iterator[HubStandIn]:
    st_path, _ = tiny_safetensors
    hub = HubStandIn()
    smol = StandInFile(GGUF_FILE, source=smollm2_path)
    readme = StandInFile("README.md", data=b"# SmolLM2 GGUF\n", lfs=False)
    hub.add(
        StandInRepo(
            GGUF_REPO,
            [readme, smol],
            tags=["gguf", "llama", "text-generation"],
            library_name="gguf",
            downloads=5000,
            likes=12,
        )
    )
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "max_position_embeddings": 2048,
        "torch_dtype": "float16",
        "hidden_size": 16,
    }
    tok_config = {"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}
    hub.add(
        StandInRepo(
            ST_REPO,
            [
                StandInFile("config.json", data=json.dumps(config).encode(), lfs=False),
                StandInFile(
                    "tokenizer_config.json", data=json.dumps(tok_config).encode(), lfs=False
                ),
                StandInFile("model.safetensors", source=st_path),
                StandInFile("docs/notes.md", data=b"not needed for conversion", lfs=False),
            ],
            tags=["safetensors", "transformers", "llama", "text-generation"],
            library_name="transformers",
            downloads=40,
            likes=99,
        )
    )
    hub.add(
        StandInRepo(
            GATED_REPO,
            [StandInFile("gated-Q8_0.gguf", source=st_path)],
            tags=["gguf"],
            library_name="gguf",
            gated="manual",
            allowed_tokens={GRANTED_TOKEN},
            downloads=7,
        )
    )
    hub.add(
        StandInRepo(
            PRIVATE_REPO,
            [StandInFile("private-Q8_0.gguf", source=st_path)],
            tags=["gguf"],
            library_name="gguf",
            private=True,
            allowed_tokens={GRANTED_TOKEN},
        )
    )
    hub.add(
        StandInRepo(
            CORRUPT_REPO,
            [StandInFile("corrupt-Q4_0.gguf", source=st_path, advertised_sha256="0" * 64)],
            tags=["gguf"],
            library_name="gguf",
            downloads=1,
        )
    )
    hub.add(
        StandInRepo(
            SPLIT_REPO,
            [StandInFile(name, data=f"part {name}".encode() * 5000) for name in SPLIT_FILES],
            tags=["gguf"],
            library_name="gguf",
        )
    )
    hub.add(
        StandInRepo(
            VISION_REPO,
            [
                StandInFile(VISION_FILES[0], source=smollm2_path),
                *(StandInFile(n, data=f"projector {n}".encode() * 100) for n in VISION_FILES[1:]),
            ],
            tags=["gguf", "image-text-to-text"],
            library_name="gguf",
        )
    )
    hub.start()
    yield hub
    hub.stop()


@pytest.fixture
def hub(hub_server: HubStandIn, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> HubStandIn:
    """The stand-in Hub with HF_ENDPOINT pointing at it, online mode and no stored token."""
    monkeypatch.setenv("HF_ENDPOINT", hub_server.url)
    # huggingface_hub reads HF_ENDPOINT at import; hf_hub_url() swaps the template's prefix for
    # an explicit endpoint only when the template starts with constants.ENDPOINT: patch both
    monkeypatch.setattr(constants, "ENDPOINT", hub_server.url)
    monkeypatch.setattr(
        constants,
        "HUGGINGFACE_CO_URL_TEMPLATE",
        hub_server.url + "/{repo_id}/resolve/{revision}/{filename}",
    )
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "no-stored-tokens"))
    hub_server.requests.clear()
    hub_server.throttle_s_per_chunk = 0.0
    hub_server.drop_after_bytes = None
    return hub_server
