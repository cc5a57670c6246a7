"""A minimal OpenAI-compatible chat adapter for the evaluation harness (answers and judge).

One call, one non-streaming ``chat.completions.create`` through the ``openai`` SDK, timed, with
the endpoint's token usage. The evaluation depends only on its port
(:class:`memrepo.evaluation.answers.ChatFn` returning a
:class:`~memrepo.evaluation.answers.Completion`), so another client can stand in.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from memrepo.evaluation.answers import Completion


class OpenAIChat:
    """Calls one model of an OpenAI-compatible endpoint (OpenRouter, OpenAI, vLLM, llama.cpp)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        *,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        temperature: float = 0.0,
    ) -> None:
        """Args:
        base_url: the endpoint, e.g. ``https://openrouter.ai/api/v1``.
        api_key: the bearer key.
        model: the model id sent with every request.
        timeout_s: per-request timeout in seconds.
        max_retries: the SDK's retries on 429/5xx/connection errors.
        temperature: sampling temperature (0 for reproducible evaluations).
        """
        import openai

        self.model = model
        self.temperature = temperature
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=max_retries
        )

    def __call__(
        self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int = 256
    ) -> Completion:
        """Return the model's answer to ``messages``.

        Raises:
            openai.OpenAIError: the request failed after the SDK's retries.
        """
        started = time.monotonic()
        response = self._client.chat.completions.create(
            model=self.model,
            messages=[dict(m) for m in messages],  # type: ignore[misc]
            max_tokens=max_tokens,
            temperature=self.temperature,
        )
        latency_ms = (time.monotonic() - started) * 1000
        usage = response.usage
        content = response.choices[0].message.content if response.choices else None
        return Completion(
            text=content or "",
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            latency_ms=latency_ms,
            model=response.model or self.model,
        )

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()
