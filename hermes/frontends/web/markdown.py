"""The model's Markdown as HTML for the web panel: rendered on the server, then sanitised.

markdown-it-py parses CommonMark (with tables and strikethrough) with raw HTML off, so a
``<script>`` in a reply is shown as text; nh3 (the Rust ammonia sanitiser) then keeps only the
tags and attributes a reply needs, whatever the parser let through: no script, style, iframe,
form or event handler, and links only to http(s) and mailto. Images are not rendered: a reply
that could make the browser fetch ``![](https://elsewhere/?q=<your memory>)`` would send what it
quotes to that site, so an image is shown as the link it is. Links open without a referrer.

A reply streams in pieces: :class:`StreamRenderer` renders what has come so far, at most every
``interval`` seconds (and never more than a fifth of the time), so a long reply costs little
CPU; an unclosed code fence renders as a code block to the end, as it will be once closed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

TAGS = {"p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol",
        "li", "a", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th",
        "td"}
ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "ol": {"start"},
              "th": {"style"}, "td": {"style"}}
URL_SCHEMES = {"http", "https", "mailto"}
# markdown-it writes a table column's alignment as style="text-align:..."; nothing else passes
ALIGN = {"text-align"}


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.disable("image")              # ![alt](url) stays a link (see the module's docstring)
    return md


def _attribute(tag: str, name: str, value: str) -> str | None:
    # A code block's language only: no class of the panel's own (``sr`` hides, ``skip`` moves)
    if name == "class" and not value.startswith("language-"):
        return None
    return value


def to_html(text: str) -> Markup:
    """Safe HTML of a reply's Markdown."""
    html = _parser().render(text or "")
    return Markup(nh3.clean(html, tags=TAGS, attributes=ATTRIBUTES, url_schemes=URL_SCHEMES,
                            filter_style_properties=ALIGN, attribute_filter=_attribute,
                            link_rel="noopener noreferrer nofollow"))


class StreamRenderer:
    """The HTML of a streaming reply so far, when it is time to send it again."""

    def __init__(self, interval: float = 0.1, clock: Callable[[], float] = time.monotonic,
                 cost_share: float = 0.2) -> None:
        self.interval = interval
        self.clock = clock
        self.cost_share = cost_share
        self.text = ""
        self._rendered = 0            # how much of the text the last HTML covered
        self._next = 0.0

    def add(self, chunk: str) -> Markup | None:
        """Add a chunk; the HTML of everything so far if it is time for it, else None."""
        self.text += chunk
        return self.flush() if self.clock() >= self._next else None

    def due(self) -> float | None:
        """Seconds until text not rendered yet should be (None: nothing waits)."""
        if self._rendered == len(self.text):
            return None
        return max(0.0, self._next - self.clock())

    def flush(self) -> Markup | None:
        """The HTML of all the text, if some of it was not rendered yet."""
        if self._rendered == len(self.text):
            return None
        now = self.clock()
        html = to_html(self.text)
        self._rendered = len(self.text)
        self._next = now + max(self.interval, (self.clock() - now) / self.cost_share)
        return html
