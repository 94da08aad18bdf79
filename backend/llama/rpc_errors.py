"""Errors of llama.cpp's RPC backend as QuantDesk reports them."""

from __future__ import annotations

from backend.llama.errors import LlamaError


class RpcError(LlamaError):
    """Root of the RPC errors: a worker that cannot start, or a server that cannot use one."""


class RpcUnavailableError(RpcError):
    """This llama.cpp build has no RPC backend (built without ``GGML_RPC``)."""

    exit_code = 2


class RpcEndpointError(RpcError):
    """An RPC endpoint is malformed, unreachable, busy or speaks another protocol version."""

    exit_code = 2
