"""Model-hub settings: where the library lives and how the Hub is reached."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from backend.settings.paths import subdir

MODELS_SUBDIR = "models"


class HubSettings(BaseSettings):
    """Library folder, Hub endpoint and token (each also settable by environment)."""

    model_config = SettingsConfigDict(env_prefix="QUANTDESK_", extra="ignore")

    models_dir: Path | None = Field(
        None,
        description="Folder of the model library (default: QUANTDESK_HOME/models)",
        json_schema_extra={"flags": ["--models-dir"]},
    )
    hf_endpoint: str | None = Field(
        None,
        description="Hugging Face Hub URL (default: HF_ENDPOINT or https://huggingface.co)",
    )
    hf_token: str | None = Field(
        None,
        description="Hub access token (default: HF_TOKEN or the token saved by 'hf auth login')",
    )
    download_chunk_bytes: int = Field(
        1 << 20,
        ge=4096,
        le=64 << 20,
        description="Bytes read between progress reports and cancel checks",
    )

    download_retries: int = Field(
        5,
        ge=0,
        le=50,
        description=(
            "Times a dropped connection is resumed automatically without any new bytes in "
            "between (a retry that brings bytes starts the count again)"
        ),
    )
    retry_delay_s: float = Field(
        1.0,
        ge=0.0,
        le=60.0,
        description="First wait before resuming a dropped download; doubles per fruitless try",
    )

    def library_dir(self) -> Path:
        """The models folder, created on demand."""
        if self.models_dir is not None:
            path = self.models_dir.expanduser()
            path.mkdir(parents=True, exist_ok=True)
            return path.resolve()
        return subdir(MODELS_SUBDIR).resolve()

    def endpoint(self) -> str:
        """The Hub endpoint, read when needed (so HF_ENDPOINT set after import is honoured)."""
        if self.hf_endpoint:
            return self.hf_endpoint.rstrip("/")
        from huggingface_hub import constants

        return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")

    def token(self) -> str | None:
        """An explicit token, else None (huggingface_hub then uses HF_TOKEN or the stored one)."""
        return self.hf_token or None
