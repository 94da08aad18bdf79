"""Markdown to the HTML subset Qt's rich text understands, with Pygments code colouring."""

from __future__ import annotations

import html
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name, guess_lexer
from pygments.util import ClassNotFound

CODE_BG = "#0f1117"
_PRE_STYLE = (
    f"background-color:{CODE_BG}; color:#d6dae3; font-family:'DejaVu Sans Mono',Menlo,Consolas,"
    "monospace; font-size:12px; padding:8px; margin:4px 0;"
)


def _highlight(code: str, lang: str, _attrs: Any) -> str:
    try:
        lexer = get_lexer_by_name(lang) if lang else guess_lexer(code)
    except ClassNotFound:
        lexer = None
    if lexer is None or (not lang and lexer.name == "Text only"):
        body = html.escape(code)
    else:
        formatter = HtmlFormatter(nowrap=True, noclasses=True, style="monokai")
        body = highlight(code, lexer, formatter)
    # a one-cell table gives the block a background that Qt reliably paints
    return (
        f'<table width="100%" cellpadding="8" style="margin:6px 0;" bgcolor="{CODE_BG}">'
        f'<tr><td><pre style="{_PRE_STYLE}">{body}</pre></td></tr></table>'
    )


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "highlight": _highlight, "breaks": True})
    md.enable(["table", "strikethrough"])
    return md


def markdown_to_html(text: str) -> str:
    """Render chat Markdown (code fences highlighted; raw HTML shown as text)."""
    rendered = _parser().render(text)
    # markdown-it wraps highlighted output in <pre><code>; unwrap our table from it
    rendered = rendered.replace("<pre><code", "<div").replace("</code></pre>", "</div>")
    return (
        "<style>p{margin:0 0 6px 0;} code{font-family:'DejaVu Sans Mono',monospace;"
        "background-color:#262b36;} table{border-collapse:collapse;} "
        "th,td{border:1px solid #2e3340; padding:3px 6px;}</style>" + rendered
    )
