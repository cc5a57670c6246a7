"""LLM access: the chat-model port and its OpenAI-compatible client.

:mod:`memrepo.llm.base` (the port, the usage records, the per-session budget) loads no SDK;
:class:`memrepo.llm.client.OpenAIChat` imports ``openai`` when it is built.
"""

from memrepo.llm.base import Budget, CallRecord, ChatModel, ChatResult, ToolCall, Usage

__all__ = ["Budget", "CallRecord", "ChatModel", "ChatResult", "ToolCall", "Usage"]
