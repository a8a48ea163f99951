"""A tiny document model rendered twice: Markdown (for the repository) and self-contained HTML.

Reports are built as a list of blocks (heading, paragraph, table, code, image) so the two outputs
never drift apart. HTML embeds images as data URIs, so ``report.html`` can be mailed or archived alone.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from augcse.core.outputs import write_text_atomically


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Paragraph:
    text: str


@dataclass
class Table:
    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    align_right: bool = True  # right-align every column but the first (numbers)


@dataclass
class Code:
    text: str
    language: str = ""


@dataclass
class Image:
    path: Path  # absolute
    alt: str


Block = Heading | Paragraph | Table | Code | Image


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> Document:
        self.blocks.extend(blocks)
        return self

    # ------------------------------------------------------------------ Markdown

    def to_markdown(self, base: Path) -> str:
        """Markdown with image paths relative to ``base`` (the folder the .md file is written to)."""
        out = [f"# {self.title}", ""]
        for b in self.blocks:
            if isinstance(b, Heading):
                out += ["#" * b.level + " " + b.text, ""]
            elif isinstance(b, Paragraph):
                out += [b.text, ""]
            elif isinstance(b, Table):
                numeric = [b.align_right and i > 0 and all(_numeric(r[i]) for r in b.rows) for i in range(len(b.header))]
                out += [markdown_row(b.header), markdown_rule(numeric)]
                out += [markdown_row(r) for r in b.rows] + [""]
            elif isinstance(b, Code):
                out += [f"```{b.language}", b.text.rstrip("\n"), "```", ""]
            elif isinstance(b, Image):
                out += [f"![{b.alt}]({_relative(b.path, base)})", ""]
        return "\n".join(out)

    # ------------------------------------------------------------------ HTML

    def to_html(self) -> str:
        body = []
        for b in self.blocks:
            if isinstance(b, Heading):
                body.append(f"<h{b.level}>{html.escape(b.text)}</h{b.level}>")
            elif isinstance(b, Paragraph):
                body.append(f"<p>{_inline(b.text)}</p>")
            elif isinstance(b, Table):
                head = "".join(f"<th>{_inline(h)}</th>" for h in b.header)
                rows = "".join(
                    "<tr>" + "".join(
                        f'<td class="{"num" if (i and b.align_right and _numeric(c)) else ""}">{_inline(c)}</td>'
                        for i, c in enumerate(r)
                    ) + "</tr>"
                    for r in b.rows
                )
                body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
            elif isinstance(b, Code):
                body.append(f"<pre><code>{html.escape(b.text)}</code></pre>")
            elif isinstance(b, Image):
                data = base64.b64encode(b.path.read_bytes()).decode()
                body.append(f'<figure><img alt="{html.escape(b.alt)}" src="data:image/png;base64,{data}">'
                            f"<figcaption>{html.escape(b.alt)}</figcaption></figure>")
        return _PAGE.format(title=html.escape(self.title), body="\n".join(body))

    def write(self, folder: Path, stem: str) -> tuple[Path, Path]:
        folder.mkdir(parents=True, exist_ok=True)
        md, page = folder / f"{stem}.md", folder / f"{stem}.html"
        write_text_atomically(md, self.to_markdown(folder))  # never through a link left in their place
        write_text_atomically(page, self.to_html())
        return md, page


def markdown_row(cells: Sequence[object]) -> str:
    """One Markdown table row; a cell's ``|`` is escaped and a line break becomes a space."""
    return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def markdown_rule(right: Sequence[bool]) -> str:
    """The rule under a Markdown table's header; ``True`` right-aligns that column."""
    return "|" + "|".join("---:" if r else "---" for r in right) + "|"


def markdown_table(header: Sequence[object], rows: Iterable[Sequence[object]],
                   right: Sequence[bool] | None = None) -> list[str]:
    """A Markdown table's lines: the header, its rule (``right`` right-aligns columns; none by default), the rows."""
    return [markdown_row(header), markdown_rule(right or [False] * len(header)), *map(markdown_row, rows)]


def _numeric(cell: str) -> bool:
    """Numbers, signed deltas, "a ± b (n=3)" and dashes are right-aligned; words are not."""
    import re

    return bool(re.fullmatch(r"\**[-+−]?[\d.,e+\-]+( ± [\d.]+)?( \(n=\d+\))?\**|—", str(cell).strip()))


def _relative(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _inline(text: str) -> str:
    """Escape, then honour the only inline markup reports use: **bold** and `code`."""
    import re

    out = html.escape(str(text))
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }}
h1 {{ border-bottom: 2px solid #ddd; padding-bottom: .3em; }}
h2 {{ border-bottom: 1px solid #eee; padding-bottom: .2em; margin-top: 1.6em; }}
table {{ border-collapse: collapse; margin: .8em 0; font-size: 14px; }}
th, td {{ border: 1px solid #ccc; padding: 4px 10px; }}
th {{ background: #f3f3f3; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
tr:nth-child(even) td {{ background: #fafafa; }}
pre {{ background: #f6f8fa; padding: .8em; overflow-x: auto; font-size: 13px; }}
code {{ font-family: Menlo, Consolas, monospace; }}
img {{ max-width: 100%; border: 1px solid #eee; }}
figcaption {{ color: #666; font-size: 13px; }}
</style></head>
<body><h1>{title}</h1>
{body}
</body></html>
"""
