"""OpenAI's Responses API (``/v1/responses``), a dialect of chat completions.

A Responses request is translated onto a :class:`ChatCompletionRequest` and prepared, run
and parsed by the same code as chat (template, grammar, tool calls); only its input items
and its output items, events and stored responses are its own.
"""
