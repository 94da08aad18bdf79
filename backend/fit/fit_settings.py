"""The settings the fit estimate reads: the serving knobs, plus what only a what-if needs."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from backend.fit.errors import FitError
from backend.settings.engine_settings import ServingKnobs

_UNQUANTISED = ("f16", "f32", "bf16")


class FitSettings(ServingKnobs):
    """:class:`ServingKnobs` as the estimate reads them (names and bounds are serve's)."""

    model_config = ConfigDict(frozen=True)

    swa_full: bool = Field(
        default=True,
        description="Full-size sliding-window cache (llama.cpp's context default, and what "
        "the server uses); False sizes it to the window",
    )

    @classmethod
    def of(cls, knobs: ServingKnobs) -> FitSettings:
        """The estimate's view of any serving knobs: serve's, the GUI's or a test's."""
        if isinstance(knobs, cls):
            return knobs
        return cls.model_validate(
            {name: getattr(knobs, name) for name in ServingKnobs.model_fields}
        )

    def check(self) -> None:
        """Refuse what llama.cpp refuses to create."""
        if self.cache_type_v not in _UNQUANTISED and self.flash_attn == "off":
            raise FitError("a quantised V cache needs flash attention (-fa on or auto)")
