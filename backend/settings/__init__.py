"""Settings: one pydantic-settings model per concern, env prefix ``QUANTDESK_``."""

from backend.settings.engine_settings import EngineSettings
from backend.settings.model_settings_store import ModelSettingsStore
from backend.settings.paths import quantdesk_home
from backend.settings.router_settings import RouterSettings
from backend.settings.server_settings import ServerSettings

__all__ = [
    "EngineSettings",
    "ModelSettingsStore",
    "RouterSettings",
    "ServerSettings",
    "quantdesk_home",
]
