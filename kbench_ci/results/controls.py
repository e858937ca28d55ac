"""Control characters in text a pull request's code wrote (its exceptions, its compiler's output,
names a worker reported), made visible before that text reaches a reader.

A bidi override (U+202E) turns what follows it around on screen, so a reviewer reads another
message, path or verdict than the one written; ESC starts a terminal sequence that the job log's
viewer plays (``\\x1b[2J`` clears what was shown); other C0 and C1 controls break lines where the
runner and Markdown do not expect them. Each is written as its escape (``\\u202e``, ``\\x1b``):
visible, so a reviewer sees that the head tried, where stripping would hide it.

Standard library only: the fork recipe's comment workflow imports it under ``python -S``.
"""

from __future__ import annotations

import re

__all__ = ["BIDI_CONTROLS", "show_controls"]

#: the embeddings and overrides (U+202A-U+202E), the isolates (U+2066-U+2069), the marks
#: (U+200E, U+200F, U+061C): the Unicode bidi formatting characters (UAX #9)
BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"

#: C0 (U+0000-U+001F), DEL, C1 (U+0080-U+009F), the bidi controls, and the line and paragraph
#: separators (U+2028, U+2029), which Python's splitlines() and some viewers take as line ends
_CONTROL = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{BIDI_CONTROLS}\u2028\u2029]")


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def show_controls(text: str, keep: str = "\n\t") -> str:
    """``text`` with every control character but those in ``keep`` (by default the line feed and
    the tab that a report's lines and a log's lines are made of) written as its escape."""
    return _CONTROL.sub(lambda found: found.group(0) if found.group(0) in keep else _escape(found.group(0)), text)
