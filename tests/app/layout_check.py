"""Find overlapping, clipped and squeezed widgets by comparing geometries, not pixels.

:func:`layout_problems` walks the visible widgets under a root and returns one line
per problem:

- **overlap**: two visible sibling widgets whose rectangles intersect;
- **clipped**: a widget that reaches outside its parent's rectangle (the content of a
  scroll area may, that is what scrolling is for; but not sideways when the area has
  no horizontal scroll bar);
- **squeezed**: a label, button, line edit, combo box, spin box or check box smaller
  than its minimum size hint, a one-line label narrower than its text (Qt then cuts
  the text), or a word-wrapped label shorter than its wrapped text needs.

Compound widgets (spin boxes, combo boxes, tab bars, item views, charts) are treated
as one box: their insides are Qt's business. A widget that is meant to float over
others sets the dynamic property ``layoutOverlay`` to true; a label meant to cut its
text (``ElidedLabel``) ignores its size hint horizontally, and both are skipped.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractScrollArea,
    QAbstractSpinBox,
    QCheckBox,
    QComboBox,
    QGraphicsView,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QScrollArea,
    QScrollBar,
    QSizePolicy,
    QStackedWidget,
    QTabBar,
    QTabWidget,
    QToolButton,
    QWidget,
)

# Widgets whose children are their own implementation: checked as a single box.
_OPAQUE: tuple[type[QWidget], ...] = (
    QAbstractSpinBox,
    QComboBox,
    QLineEdit,
    QAbstractButton,
    QTabBar,
    QScrollBar,
    QAbstractItemView,
    QGraphicsView,
)
# Widgets held to their minimum size hint.
_SIZED: tuple[type[QWidget], ...] = (
    QPushButton,
    QToolButton,
    QLineEdit,
    QComboBox,
    QAbstractSpinBox,
    QCheckBox,
    QRadioButton,
)


def _name(widget: QWidget) -> str:
    """A readable path for messages: Class#objectName 'text' under its ancestors."""
    parts: list[str] = []
    w: QWidget | None = widget
    while w is not None and len(parts) < 4:
        label = type(w).__name__
        if w.objectName() and not w.objectName().startswith("qt_"):
            label += f"#{w.objectName()}"
        text = getattr(w, "text", None)
        if callable(text) and not isinstance(w, QLineEdit | QAbstractSpinBox):
            try:
                value = str(text())
            except TypeError:
                value = ""
            if value:
                label += f" {value[:30]!r}"
        title = getattr(w, "title", None)
        if callable(title) and not isinstance(w, QTabWidget):
            value = str(title())
            if value:
                label += f" {value[:30]!r}"
        parts.append(label)
        w = w.parentWidget()
    return " < ".join(parts)


def _is_overlay(widget: QWidget) -> bool:
    return bool(widget.property("layoutOverlay")) or widget.isWindow()


_DIRECT = Qt.FindChildOption.FindDirectChildrenOnly


def _visible_children(widget: QWidget) -> list[QWidget]:
    return [
        c
        for c in widget.findChildren(QWidget, options=_DIRECT)
        if c.isVisible() and not _is_overlay(c)
    ]


def _squeezed(widget: QWidget) -> str | None:
    size = widget.size()
    if isinstance(widget, QLabel):
        if widget.sizePolicy().horizontalPolicy() == QSizePolicy.Policy.Ignored:
            return None  # a deliberately elided label
        if widget.pixmap() is not None and not widget.pixmap().isNull():
            hint = widget.sizeHint()
            if size.width() < hint.width() or size.height() < hint.height():
                return (
                    f"pixmap label {size.width()}x{size.height()} < {hint.width()}x{hint.height()}"
                )
            return None
        if not widget.text():
            return None
        if widget.wordWrap():
            need = widget.heightForWidth(widget.width())
            if need > size.height() + 1:
                return f"wrapped text needs {need} px of height, has {size.height()}"
            return None
        hint = widget.sizeHint()
        if size.width() + 1 < hint.width():
            return f"text needs {hint.width()} px of width, has {size.width()}"
        if size.height() + 1 < widget.minimumSizeHint().height():
            return (
                f"text needs {widget.minimumSizeHint().height()} px of height, has {size.height()}"
            )
        return None
    if isinstance(widget, _SIZED):
        hint = widget.minimumSizeHint()
        if isinstance(widget, QComboBox):
            # a combo shows its current item cut short rather than grow for its longest
            # entry; only its height and a usable width are owed
            if size.height() + 1 < hint.height() or size.width() < 60:
                return f"{size.width()}x{size.height()} < min 60x{hint.height()}"
            return None
        if isinstance(widget, QAbstractButton) and not isinstance(widget, QCheckBox | QRadioButton):
            hint = hint.expandedTo(widget.sizeHint()) if widget.text() else hint
        if isinstance(widget, QCheckBox | QRadioButton) and widget.text():
            hint = hint.expandedTo(widget.sizeHint())
        if size.width() + 1 < hint.width() or size.height() + 1 < hint.height():
            return f"{size.width()}x{size.height()} < hint {hint.width()}x{hint.height()}"
    return None


def _pairwise_overlaps(children: list[QWidget]) -> list[str]:
    out = []
    for i, a in enumerate(children):
        ra = a.geometry()
        for b in children[i + 1 :]:
            inter = ra.intersected(b.geometry())
            if inter.width() > 0 and inter.height() > 0:
                out.append(f"overlap: {_name(a)} {_rect(ra)} and {_name(b)} {_rect(b.geometry())}")
    return out


def _rect(r: QRect) -> str:
    return f"({r.x()},{r.y()} {r.width()}x{r.height()})"


def layout_problems(root: QWidget) -> list[str]:
    """Every overlap, clip and squeeze under ``root`` (which must be shown)."""
    problems: list[str] = []

    def visit(widget: QWidget) -> None:
        reason = _squeezed(widget)
        if reason:
            problems.append(f"squeezed: {_name(widget)}: {reason}")
        content = widget.widget() if isinstance(widget, QScrollArea) else None
        if isinstance(widget, QScrollArea) and content is not None:
            if (
                widget.horizontalScrollBarPolicy().name == "ScrollBarAlwaysOff"
                and content.isVisible()
            ):
                need = max(content.minimumSizeHint().width(), content.minimumWidth())
                have = widget.viewport().width()
                if need > have + 1:
                    problems.append(
                        f"clipped: {_name(content)} needs {need} px of width "
                        f"in a scroll area {have} px wide with no horizontal "
                        f"scroll bar"
                    )
            if content.isVisible():
                visit(content)
            return
        if isinstance(widget, _OPAQUE):
            return
        if isinstance(widget, QAbstractScrollArea):  # e.g. a text edit: one box
            return
        children = _visible_children(widget)
        if isinstance(widget, QStackedWidget):
            children = [c for c in children if c is widget.currentWidget()]
        inside = widget.rect()
        for child in children:
            g = child.geometry()
            if not inside.contains(g):
                problems.append(
                    f"clipped: {_name(child)} {_rect(g)} outside its parent "
                    f"{_name(widget)} {_rect(inside)}"
                )
        problems.extend(_pairwise_overlaps(children))
        for child in children:
            visit(child)

    visit(root)
    return problems


__all__ = ["layout_problems"]
