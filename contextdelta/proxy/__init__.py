"""The OpenAI-compatible recording proxy behind ``contextdelta serve``: forwards chat completions (plain and
streaming) and model listings to an upstream endpoint and stores every request/response pair, redacted, in the
trace store."""

from contextdelta.proxy._redact import REDACTED, Redactor, is_secret_key
from contextdelta.proxy._server import ProxyConfig, RecordingProxy, Upstream, reassemble_stream

__all__ = ["REDACTED", "ProxyConfig", "RecordingProxy", "Redactor", "Upstream", "is_secret_key", "reassemble_stream"]
