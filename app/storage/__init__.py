"""What the GUI keeps between runs: settings, saved chats, bench runs (Qt-free, atomic writes)."""
