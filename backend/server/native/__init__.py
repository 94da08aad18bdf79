"""llama-server's native API (``/completion``, ``/props``, ``/apply-template``, ``/slots``,
``llamacpp:*`` metrics) as a thin translation onto the same engine requests, sampling and
stats as the OpenAI routes, for tools written against llama.cpp's own server."""
