"""The OpenAI-compatible recording proxy behind ``contextdelta serve``: forwards chat completions (plain and
streaming) and model listings to an upstream endpoint and stores every request/response pair, redacted, in the
trace store."""

from contextdelta.proxy._server import ProxyConfig, RecordingProxy, Upstream, reassemble_stream
from contextdelta.redaction import REDACTED, Redactor, is_secret_key

__all__ = ["REDACTED", "ProxyConfig", "RecordingProxy", "Redactor", "Upstream", "is_secret_key", "reassemble_stream"]
