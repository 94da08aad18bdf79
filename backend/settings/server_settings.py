"""HTTP server settings: bind address, auth, CORS and limits."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# llama-server's --reasoning-format values that QuantDesk implements
ReasoningFormat = Literal["auto", "deepseek", "none"]


class ListenSettings(BaseModel):
    """Where the server listens and which browser origins may call it (the GUI keeps these)."""

    host: str = Field(
        default="127.0.0.1",
        min_length=1,
        description="Address to bind; a non-loopback address needs --api-key or --insecure",
        json_schema_extra={"flags": ["--host"]},
    )
    port: int = Field(
        default=8080,
        ge=0,
        le=65_535,
        description="TCP port (0 picks a free one)",
        json_schema_extra={"flags": ["--port"]},
    )
    cors_origins: list[str] = Field(
        default_factory=list,
        description="Also allow these browser origins by CORS (repeatable, or comma-separated "
        "as llama-server's --cors-origins; '*' allows any); loopback origins "
        "(http(s)://localhost, 127.0.0.1, [::1], any port) are always allowed, so "
        "llama-server's 'localhost' keyword adds nothing",
        json_schema_extra={"flags": ["--cors-origin", "--cors-origins"]},
    )

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _origin_lists(cls, value: object) -> object:
        """llama-server's comma-separated form, and its ``localhost`` keyword (loopback
        origins only: always allowed here)."""
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            return value
        origins = [o.strip() for item in value for o in str(item).split(",")]
        return [o for o in origins if o and o != "localhost"]

    ollama_port: int | None = Field(
        default=None,
        ge=1,
        le=65_535,
        description="Also answer on this loopback port (Ollama's is 11434), for clients that "
        "expect Ollama there: the same routes and checks as the main port",
        json_schema_extra={"flags": ["--ollama-port"]},
    )


class ServerSettings(BaseSettings, ListenSettings):
    """How the OpenAI-compatible server listens, whom it lets in and what it accepts."""

    model_config = SettingsConfigDict(env_prefix="QUANTDESK_", extra="ignore")

    api_key: str | None = Field(
        default=None,
        description="Require 'Authorization: Bearer KEY' on every API call",
        json_schema_extra={"flags": ["--api-key"]},
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="On loopback, also answer requests whose Host header is this name "
        "(repeatable; localhost, 127.0.0.1 and [::1] are always allowed)",
        json_schema_extra={"flags": ["--allowed-host"]},
    )
    insecure: bool = Field(
        default=False,
        description="Allow binding a non-loopback address without an API key",
        json_schema_extra={"flags": ["--insecure"]},
    )
    max_tokens_limit: int = Field(
        default=4096,
        ge=1,
        le=1_048_576,
        description="Upper bound on max_tokens of any request",
        json_schema_extra={"flags": ["--max-tokens-limit"]},
    )
    strict_max_tokens: bool = Field(
        default=False,
        description="Refuse (400) a max_tokens larger than the room left in the context, as "
        "OpenAI does, instead of stopping with 'length' when the context is full",
        json_schema_extra={"flags": ["--strict-max-tokens"]},
    )
    max_body_bytes: int = Field(
        # a coding agent sends every earlier screenshot again each turn, base64 (4/3 bigger)
        default=64 * 1024 * 1024,
        ge=1024,
        le=1024 * 1024 * 1024,
        description="Largest request body in bytes; a bigger one gets a 413",
        json_schema_extra={"flags": ["--max-body-bytes"]},
    )
    max_choices: int = Field(
        default=8,
        ge=1,
        le=128,
        description="Upper bound on n and best_of: each choice is a sequence of its own",
        json_schema_extra={"flags": ["--max-choices"]},
    )
    max_embedding_inputs: int = Field(
        default=256,
        ge=1,
        le=2048,
        description="Most inputs one /v1/embeddings request may carry",
        json_schema_extra={"flags": ["--max-embedding-inputs"]},
    )
    responses_store_mib: int = Field(
        default=64,
        ge=0,
        le=65_536,
        description="Memory for the responses kept for GET /v1/responses/{id} and "
        "previous_response_id, in MiB: in this process only, the oldest dropped first "
        "(0 keeps none)",
        json_schema_extra={"flags": ["--responses-store-mib"]},
    )
    reasoning_format: ReasoningFormat = Field(
        default="auto",
        description="Thinking between <think> and </think> at the start of an answer (or "
        "after a chat template that opens <think>): 'auto' and 'deepseek' return it apart, as "
        "reasoning_content in chat, thinking blocks in /v1/messages and reasoning items in "
        "/v1/responses; 'none' leaves it in the answer's text",
        json_schema_extra={"flags": ["--reasoning-format"]},
    )
    keep_billing_header: bool = Field(
        default=False,
        description="Keep the 'x-anthropic-billing-header: ...; cch=...;' line that Claude Code "
        "puts first in its system prompt (default: dropped before templating on /v1/messages: "
        "it is metadata whose stamp changes on every request, so left in, no two requests "
        "would share a cached prompt prefix)",
        json_schema_extra={"flags": ["--keep-billing-header"]},
    )
    slot_save_path: str | None = Field(
        default=None,
        description="Folder for POST /slots/{id}?action=save|restore: a slot's tokens and KV "
        "are written to and read from files there, named by the request (plain names, no "
        "folders); without it slot actions are refused, as llama-server does",
        json_schema_extra={"flags": ["--slot-save-path"]},
    )
    port_file: str | None = Field(
        default=None,
        description="Write the bound port to this file once listening (for supervisors)",
        json_schema_extra={"flags": ["--port-file"]},
    )

    @field_validator("api_key")
    @classmethod
    def _key_not_blank(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.strip():
            raise ValueError("the API key is blank; give a real key or leave the flag out")
        if "," in value:  # llama-server's list of keys: not silently one key with a comma
            raise ValueError(
                "one key only here (llama-server takes a comma-separated list of keys)"
            )
        return value.strip()  # a client's 'Bearer KEY' is compared stripped
