"""The Compare page's right side: the results table, the KLD-against-size plot, the answers
side by side and the run's log; a view of one ``CompareResult``."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QScrollArea,
    QSplitter,
    QStackedWidget,
    QTableWidget,
    QTabWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.page_models.compare_runs import (
    RESULT_COLUMNS,
    Band,
    kld_plot,
    result_rows,
    summary_text,
)
from app.page_models.markdown_render import markdown_to_html
from app.theme import BAD, GOOD, MUTED, SERIES, SURFACE, TEXT, WARN
from app.widgets.common import EmptyState, log_view, table_item
from backend.compare.results import CompareResult

BAND_COLOURS = {Band.REFERENCE: MUTED, Band.GOOD: GOOD, Band.WARN: WARN, Band.BAD: BAD}
KLD_COLUMN = RESULT_COLUMNS.index("KLD")


class CompareResultsView(QWidget):
    """An empty state until a result is shown; then tabs: Results, Answers and Log."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.result: CompareResult | None = None
        v = QVBoxLayout(self)
        v.setContentsMargins(0, 0, 0, 0)
        head = QHBoxLayout()
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setProperty("muted", True)
        self.export_button = QPushButton("Export HTML report…")
        head.addWidget(self.summary, 1)
        head.addWidget(self.export_button)
        v.addLayout(head)
        self.stack = QStackedWidget()
        self.empty = EmptyState(
            "compare",
            "No comparison yet",
            "Choose a reference (ideally F16 or Q8_0) and one or more quants of the same model, "
            "then run. Perplexity and KL divergence are measured on the same text; lower KLD "
            "means closer to the reference.",
        )
        self.tabs = QTabWidget()
        self.tabs.addTab(self._build_table_tab(), "Results")
        self.tabs.addTab(self._build_answers_tab(), "Answers")
        self.log_view = log_view(max_lines=5000)
        self.tabs.addTab(self.log_view, "Log")
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.tabs)
        v.addWidget(self.stack, 1)

    def _build_table_tab(self) -> QWidget:
        split = QSplitter(Qt.Orientation.Vertical)
        self.table = QTableWidget(0, len(RESULT_COLUMNS))
        self.table.setHorizontalHeaderLabels(list(RESULT_COLUMNS))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(32)
        self.table.setShowGrid(False)
        self.table.setWordWrap(False)
        # narrow windows cut the model name; keep its end, where the quant type is
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        split.addWidget(self.table)
        card = QFrame()
        card.setObjectName("Card")
        lay = QVBoxLayout(card)
        lay.setContentsMargins(10, 8, 10, 6)
        title = QLabel(
            "Quality against size  ·  mean KL divergence vs file size (lower left is better)"
        )
        title.setStyleSheet("font-weight: 600; color: #c9d0dc;")
        lay.addWidget(title)
        self.plot = pg.PlotWidget()
        self.plot.setBackground(SURFACE)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.showGrid(x=True, y=True, alpha=0.12)
        self.plot.setLabel("bottom", "file size", units="MiB", color=MUTED)
        self.plot.setLabel("left", "mean KLD", color=MUTED)
        self.plot.getAxis("left").enableAutoSIPrefix(False)
        for axis in ("left", "bottom"):
            self.plot.getAxis(axis).setTextPen(MUTED)
            self.plot.getAxis(axis).setPen(MUTED)
        lay.addWidget(self.plot, 1)
        split.addWidget(card)
        split.setSizes([230, 380])
        return split

    def _build_answers_tab(self) -> QWidget:
        tab = QWidget()
        v = QVBoxLayout(tab)
        v.setContentsMargins(10, 10, 10, 10)
        row = QHBoxLayout()
        row.addWidget(QLabel("Prompt"))
        self.prompt_combo = QComboBox()
        self.prompt_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.prompt_combo.currentIndexChanged.connect(self._show_answers)
        row.addWidget(self.prompt_combo, 1)
        v.addLayout(row)
        self.answers_area = QScrollArea()
        self.answers_area.setWidgetResizable(True)
        holder = QWidget()
        self.answers_row = QHBoxLayout(holder)
        self.answers_row.setContentsMargins(0, 0, 0, 0)
        self.answers_row.setSpacing(10)
        self.answers_area.setWidget(holder)
        self.answer_views: list[QTextBrowser] = []
        self._answer_columns: list[QFrame] = []
        self.answers_note = QLabel("This run has no answers (they were switched off).")
        self.answers_note.setProperty("muted", True)
        v.addWidget(self.answers_area, 1)
        v.addWidget(self.answers_note)
        return tab

    # -- showing ----------------------------------------------------------------------------
    def show_result(self, result: CompareResult) -> None:
        self.result = result
        self.stack.setCurrentWidget(self.tabs)
        self._fill_table(result)
        self._plot(result)
        self._fill_answers(result)
        self.summary.setText(summary_text(result))
        self.tabs.setCurrentIndex(0)

    def show_log(self) -> None:
        self.stack.setCurrentWidget(self.tabs)
        self.tabs.setCurrentWidget(self.log_view)

    def _fill_table(self, result: CompareResult) -> None:
        rows = result_rows(result)
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for col, cell in enumerate(row.cells):
                item = table_item(cell.text, cell.tip, align_right=col > 0)
                if row.band is Band.REFERENCE or (row.band and col == KLD_COLUMN):
                    item.setForeground(QColor(BAND_COLOURS[row.band]))
                self.table.setItem(r, col, item)

    def _plot(self, result: CompareResult) -> None:
        plot = self.plot
        plot.clear()
        data = kld_plot(result)
        for p in [*data.points, data.reference]:
            colour = MUTED if p is data.reference else SERIES[p.series % len(SERIES)]
            plot.plot(
                [p.size_mib],
                [p.kld],
                pen=None,
                symbol="d" if p is data.reference else "o",
                symbolSize=12 if p is data.reference else 11,
                symbolBrush=colour,
                symbolPen=None,
                name=p.label,
            )
            anchor = (0, 1.1) if data.label_to_the_right(p) else (1, 1.1)
            label_colour = MUTED if p is data.reference else TEXT
            text = pg.TextItem(p.label, color=label_colour, anchor=anchor)
            text.setPos(p.size_mib, p.kld)
            plot.addItem(text)
        plot.setXRange(*data.x_range, padding=0)
        plot.setYRange(0, data.y_top, padding=0)

    def plotted_points(self) -> int:
        """How many candidates the plot shows (the reference is not one)."""
        items = self.plot.getPlotItem().listDataItems()
        return max(0, len(items) - 1)

    def _fill_answers(self, result: CompareResult) -> None:
        self.prompt_combo.blockSignals(True)
        self.prompt_combo.clear()
        for a in result.answers:
            prompt = a.prompt
            self.prompt_combo.addItem(prompt if len(prompt) < 90 else prompt[:87] + "…")
        self.prompt_combo.blockSignals(False)
        for column in self._answer_columns:
            column.setParent(None)
            column.deleteLater()
        self._answer_columns = []
        self.answer_views = []
        names = [f"{result.reference.name} (reference)", *[c.name for c in result.candidates]]
        for name in names if result.answers else []:
            column = QFrame()
            column.setObjectName("Card")
            column.setMinimumWidth(170)
            cv = QVBoxLayout(column)
            cv.setContentsMargins(10, 8, 10, 10)
            title = QLabel(name)
            title.setStyleSheet("font-weight: 600; color: #c9d0dc;")
            title.setWordWrap(True)
            view = QTextBrowser()
            view.setOpenExternalLinks(False)
            cv.addWidget(title)
            cv.addWidget(view, 1)
            self.answers_row.addWidget(column, 1)
            self._answer_columns.append(column)
            self.answer_views.append(view)
        self.answers_note.setVisible(not result.answers)
        self._show_answers(0)

    def _show_answers(self, index: int) -> None:
        answers = self.result.answers if self.result is not None else []
        if not 0 <= index < len(answers):
            return
        a = answers[index]
        for view, text in zip(self.answer_views, [a.reference, *a.candidates], strict=False):
            view.setHtml(markdown_to_html(text))
            view.setProperty("answer_text", text)
        self.prompt_combo.setToolTip(a.prompt)

    def answer_texts(self) -> list[str]:
        return [str(view.property("answer_text") or "") for view in self.answer_views]
