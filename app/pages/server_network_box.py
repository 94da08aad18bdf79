"""The Server page's Network box: where the server listens, its API key, the origins a
browser may call it from, and whether it answers Ollama's clients too."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QCheckBox, QFormLayout, QLineEdit, QWidget

from app.pages.server_knob_widgets import KnobBox, knob_spin
from app.storage.app_settings import ServerKnobs
from app.widgets.checkbox_style import use_visible_checkboxes

OLLAMA_PORT = 11434  # where Ollama's clients look by default


class NetworkBox(KnobBox):
    """Host, port, API key, CORS origins and the Ollama port; ``changed()`` on an edit."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Network", parent)
        form = QFormLayout(self)
        form.setHorizontalSpacing(14)
        form.setVerticalSpacing(8)
        self.host_edit = QLineEdit()
        self.host_edit.setToolTip("127.0.0.1 keeps the server private to this machine")
        self.port_spin = knob_spin("port", special="any free port")
        self.key_edit = QLineEdit()
        self.key_edit.setPlaceholderText("none (required when binding a public address)")
        self.key_edit.setEchoMode(QLineEdit.EchoMode.PasswordEchoOnEdit)
        self.cors_edit = QLineEdit()
        self.cors_edit.setPlaceholderText("localhost always; e.g. https://my.app, or *")
        form.addRow("Host", self.host_edit)
        form.addRow("Port", self.port_spin)
        form.addRow("API key", self.key_edit)
        form.addRow("CORS origins", self.cors_edit)
        self.ollama_check = QCheckBox(f"Answer Ollama clients on port {OLLAMA_PORT}")
        self.ollama_check.setToolTip(
            "Zed, JetBrains, Continue, Open WebUI and VS Code Copilot look for Ollama on "
            f"http://localhost:{OLLAMA_PORT}: answer there too (loopback only). Not while "
            "Ollama itself runs."
        )
        form.addRow("", self.ollama_check)
        use_visible_checkboxes(self)
        self.watch(self.ollama_check, self.host_edit, self.key_edit, self.cors_edit, self.port_spin)

    def load(self, k: ServerKnobs) -> None:
        self.host_edit.setText(k.host)
        self.port_spin.setValue(k.port)
        self.key_edit.setText(k.api_key)
        self.cors_edit.setText(", ".join(k.cors_origins))
        self.ollama_check.setChecked(k.ollama_port is not None)

    def values(self) -> dict[str, Any]:
        """The knobs as the box shows them."""
        origins = [o.strip() for o in self.cors_edit.text().split(",") if o.strip()]
        return {
            "host": self.host_edit.text().strip() or "127.0.0.1",
            "port": self.port_spin.value(),
            "api_key": self.key_edit.text().strip(),
            "cors_origins": origins,
            "ollama_port": OLLAMA_PORT if self.ollama_check.isChecked() else None,
        }
