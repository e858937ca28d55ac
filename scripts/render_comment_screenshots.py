"""The PR comments of a 3-case and a 12-case compare (and the 12 cases in CPU mode), exactly as
`kbench-ci comment` would post them, from the synthetic suite of tests/unit/report/comment_suite.py,
rendered as GitHub shows them and measured.

    .venv/bin/python scripts/render_comment_screenshots.py DIR [--tools NODE_DIR] [--png]

writes DIR/compare-3.md, DIR/compare-12.md and DIR/compare-12-cpu.md and prints their sizes. With
``--tools`` (a folder whose node_modules holds ``mermaid`` and ``github-markdown-css``:
``npm install mermaid github-markdown-css``) it also renders each with cmark-gfm (GitHub's
extensions) into GitHub's markdown CSS at GitHub's comment width (900 px), draws the Mermaid
chart, and has headless Chromium measure every table: it prints each table's scrollWidth and
exits 1 when one is wider than the comment (a horizontal scroll bar). ``--png`` also writes
DIR/<name>.png, the screenshots kept in docs/screenshots.

Debian: ``apt-get install chromium cmark-gfm fonts-noto-color-emoji``. The CI-side check of the
same budget, without a browser, is tests/unit/report/test_comment_layout.py.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbench_ci.github.comment import compose_body  # noqa: E402
from tests.unit.report.comment_suite import write_report  # noqa: E402

#: GitHub's comment body width on a desktop pull request page
COMMENT_WIDTH = 900
#: around the body in the screenshot, so it reads like the comment box
MARGIN = 16

PAGE = """<!doctype html>
<html><head><meta charset="utf-8">
<link rel="stylesheet" href="{css}">
<style>
  body {{ margin: 0; background: #fff; }}
  .markdown-body {{ box-sizing: content-box; width: {width}px; padding: {margin}px; }}
</style>
<script src="{mermaid}"></script>
</head><body><article class="markdown-body">
{body}
</article>
<pre id="kbench-measure" style="display:none"></pre>
<script>
(async () => {{
  const blocks = document.querySelectorAll('pre[lang="mermaid"], code.language-mermaid');
  for (const block of blocks) {{
    const pre = block.tagName === 'PRE' ? block : block.parentElement;
    const div = document.createElement('div');
    div.className = 'mermaid';
    div.textContent = pre.textContent;
    pre.replaceWith(div);
  }}
  let chartError = null;
  try {{
    mermaid.initialize({{ startOnLoad: false }});
    await mermaid.run({{ querySelector: '.mermaid' }});
  }} catch (e) {{ chartError = String(e); }}
  const body = document.querySelector('.markdown-body');
  const tables = [...document.querySelectorAll('.markdown-body table')].map(t => {{
    const open = t.closest('details');
    if (open) open.open = true;
    const width = {{ scrollWidth: t.scrollWidth, clientWidth: t.clientWidth }};
    // the narrowest the table can be: every cell wrapped wherever it can break
    t.style.width = 'min-content';
    width.minContent = t.scrollWidth;
    t.style.width = '';
    if (open) open.open = false;
    return width;
  }});
  const charts = [...document.querySelectorAll('.mermaid svg')].map(s => {{
    const box = s.getBoundingClientRect();
    return {{ width: Math.round(box.width), height: Math.round(box.height) }};
  }});
  document.getElementById('kbench-measure').textContent = JSON.stringify({{
    bodyWidth: body.clientWidth, height: document.documentElement.scrollHeight, tables, charts, chartError,
    unrendered: document.querySelectorAll('.mermaid:not([data-processed])').length,
  }});
}})();
</script>
</body></html>
"""


def write_comments(out: Path) -> list[Path]:
    """The three comments' markdown; prints each one's size."""
    written = []
    for name, count, gpu in (("compare-3", 3, True), ("compare-12", 12, True), ("compare-12-cpu", 12, False)):
        with tempfile.TemporaryDirectory() as scratch:
            body, truncated, _ = compose_body(write_report(count, Path(scratch) / name, gpu=gpu), env={})
        path = out / f"{name}.md"
        path.write_text(body, encoding="utf-8")
        print(f"{name}: {len(body.encode()):,} bytes{' (shortened)' if truncated else ''}")
        written.append(path)
    return written


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit("no chromium on PATH: apt-get install chromium")


def render(markdown: Path, tools: Path, png: bool) -> dict[str, object]:
    """The comment in Chromium at the comment width: its measurements (and its screenshot)."""
    cmark = shutil.which("cmark-gfm") or sys.exit("no cmark-gfm on PATH: apt-get install cmark-gfm")
    body = subprocess.run(
        [cmark, "--unsafe", *(arg for e in ("table", "strikethrough", "autolink", "tagfilter") for arg in ("--extension", e)), "--github-pre-lang",
         str(markdown)], check=True, capture_output=True, text=True,
    ).stdout
    modules = tools / "node_modules"
    page = markdown.with_suffix(".html")
    page.write_text(PAGE.format(
        css=(modules / "github-markdown-css" / "github-markdown-light.css").as_uri(),
        mermaid=(modules / "mermaid" / "dist" / "mermaid.min.js").as_uri(),
        width=COMMENT_WIDTH, margin=MARGIN, body=body,
    ), encoding="utf-8")
    browser = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--allow-file-access-from-files", "--virtual-time-budget=15000"]
    width = COMMENT_WIDTH + 2 * MARGIN
    dom = subprocess.run([*browser, f"--window-size={width},800", "--dump-dom", page.as_uri()],
                         check=True, capture_output=True, text=True).stdout
    found = re.search(r'<pre id="kbench-measure"[^>]*>(.*?)</pre>', dom, re.S)
    if not found or not found.group(1).strip():
        raise SystemExit(f"{page}: the page did not report its measurements")
    measured: dict[str, object] = json.loads(html.unescape(found.group(1)))
    if png:
        subprocess.run([*browser, f"--window-size={width},{measured['height']}",
                        f"--screenshot={markdown.with_suffix('.png')}", page.as_uri()],
                       check=True, capture_output=True)
    return measured


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--tools", type=Path, help="folder with node_modules/{mermaid,github-markdown-css}")
    parser.add_argument("--png", action="store_true", help="also write a screenshot of each comment")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    comments = write_comments(args.out)
    if args.tools is None:
        return 0
    too_wide = 0
    for path in comments:
        measured = render(path, args.tools, args.png)
        tables = measured["tables"]
        assert isinstance(tables, list)
        widest = max((t["scrollWidth"] for t in tables), default=0)
        print(f"{path.stem}: body {measured['bodyWidth']} px; {len(tables)} table(s), scrollWidth "
              f"{', '.join(str(t['scrollWidth']) for t in tables)} px (widest {widest}; narrowest possible "
              f"{', '.join(str(t['minContent']) for t in tables)} px); "
              f"charts {measured['charts']}; unrendered charts {measured['unrendered']}"
              + (f"; chart error: {measured['chartError']}" if measured["chartError"] else ""))
        too_wide += sum(t["scrollWidth"] > COMMENT_WIDTH for t in tables)
    if too_wide:
        print(f"{too_wide} table(s) wider than {COMMENT_WIDTH} px: a horizontal scroll bar in the comment")
    return 1 if too_wide else 0


if __name__ == "__main__":
    sys.exit(main())
