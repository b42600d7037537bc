"""Model providers: the OpenAI-compatible client and an in-process mock for unit tests."""

from contextdelta.providers.base import ChatProvider, ProviderFailure, ProviderResponse, ToolCallRequest, Usage

__all__ = ["ChatProvider", "ProviderFailure", "ProviderResponse", "ToolCallRequest", "Usage"]
