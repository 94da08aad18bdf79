"""Settings: one pydantic-settings model per concern, env prefix ``QUANTDESK_``."""

from backend.settings.engine_settings import EngineSettings
from backend.settings.paths import quantdesk_home
from backend.settings.server_settings import ServerSettings

__all__ = ["EngineSettings", "ServerSettings", "quantdesk_home"]
