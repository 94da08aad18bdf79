#!/bin/sh
# Install QuantDesk's desktop entry and icon for the current user.
#   packaging/install-desktop-entry.sh [BUNDLE_DIR]      (default: dist/quantdesk)
#   packaging/install-desktop-entry.sh --uninstall
# Puts a `quantdesk` link in ~/.local/bin, the icon in the hicolor theme and
# quantdesk.desktop (Exec= the bundle's executable) in ~/.local/share/applications.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
data=${XDG_DATA_HOME:-$HOME/.local/share}
apps="$data/applications"
icons="$data/icons/hicolor/scalable/apps"
bin="$HOME/.local/bin"

if [ "${1:-}" = "--uninstall" ]; then
    rm -f "$apps/quantdesk.desktop" "$icons/quantdesk.svg" "$bin/quantdesk"
    command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database "$apps" || true
    echo "QuantDesk desktop entry removed"
    exit 0
fi

bundle=${1:-$root/dist/quantdesk}
bundle=$(cd "$bundle" 2>/dev/null && pwd) || { echo "no bundle at ${1:-dist/quantdesk}: run 'make package' first" >&2; exit 1; }
exe="$bundle/quantdesk"
[ -x "$exe" ] || { echo "$exe is missing or not executable" >&2; exit 1; }

mkdir -p "$apps" "$icons" "$bin"
ln -sf "$exe" "$bin/quantdesk"
cp "$root/assets/icons/quantdesk.svg" "$icons/quantdesk.svg"
# Exec/TryExec point at the bundle itself, so the menu works even if ~/.local/bin is not on PATH
sed -e "s|^Exec=.*|Exec=\"$exe\"|" -e "s|^TryExec=.*|TryExec=$exe|" \
    "$root/assets/quantdesk.desktop" > "$apps/quantdesk.desktop.part"
chmod 644 "$apps/quantdesk.desktop.part"
mv "$apps/quantdesk.desktop.part" "$apps/quantdesk.desktop"
command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database "$apps" || true
command -v gtk-update-icon-cache >/dev/null 2>&1 && gtk-update-icon-cache -q "$data/icons/hicolor" 2>/dev/null || true
echo "installed $apps/quantdesk.desktop -> $exe"
