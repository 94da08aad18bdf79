"""Anthropic's Messages API (Claude Code's dialect) as a translation onto chat completions:
an Anthropic request becomes a :class:`~backend.server.schemas.ChatCompletionRequest`, is
prepared and generated as chat's is, and its text comes back as Anthropic content blocks."""
