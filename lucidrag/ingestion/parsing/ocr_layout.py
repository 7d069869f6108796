"""The geometry of an OCR'd page: text boxes → blocks (headings, paragraphs, tables) in the order a
person reads them. Pure geometry over the boxes the recogniser returns; no model.

    page_lines(quads, texts, scores) -> [OcrLine]   boxes turned upright (the page's skew undone)
    read_page(lines) -> [Block]                      reading order, tables, headings, paragraphs

Steps (docs/DESIGN.md → "An OCR'd page is laid out from its boxes"): a box the detector ran
across a narrow gutter is cut at it; boxes of one row that nearly touch are one line; runs of rows
whose boxes fall into the same columns, not all of them running text, are a table (a form when a
column is all "Label:" cells); the rest is put in reading order by Breuel's rules (a before b when
they share columns and a is above, or a is left of b with nothing spanning both between them; a
line under two columns comes after all above it), which reads column by column under a title
that spans them; lines follow each other into paragraphs; a line clearly larger than the body
text, or a short first line standing alone, is a heading.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Box = tuple[float, float, float, float]  # left, top, right, bottom

_SENTENCE_END = ".!?。！？;；"
# Above this many lines the pairwise ordering (n² memory, n³ work) gives way to rows top to bottom.
_MAX_ORDERED = 400
_HEADING_RATIO = 1.25  # a heading's text is at least this much taller than the body text
_HEADING_MAX_WIDTH = 90  # display width (a CJK character counts two)
_PROSE_WIDTH = 14  # a column whose lines are mostly this wide or wider is running text, not a table


@dataclass(frozen=True)
class OcrLine:
    text: str
    score: float
    box: Box

    @property
    def height(self) -> float:
        return self.box[3] - self.box[1]


@dataclass(frozen=True)
class Block:
    """A heading (level 1 = the largest), a paragraph, or a table (`rows`, the first is the header)."""

    kind: str  # "heading" | "text" | "table"
    text: str
    level: int = 0
    rows: tuple[tuple[str, ...], ...] = ()


def is_wide(ch: str) -> bool:
    """CJK ideographs, kana, hangul and full-width punctuation: written without spaces."""
    code = ord(ch)
    return (0x2E80 <= code <= 0x9FFF or 0xAC00 <= code <= 0xD7AF or 0xF900 <= code <= 0xFAFF
            or 0xFE30 <= code <= 0xFE4F or 0xFF00 <= code <= 0xFF60 or 0x20000 <= code <= 0x2FA1F)


def display_width(text: str) -> int:
    return sum(2 if is_wide(ch) else 1 for ch in text)


# ---------------------------------------------------------------------------------------------
# Boxes upright


def page_lines(quads: list, texts: list[str], scores: list[float]) -> list[OcrLine]:
    """OcrLines from the recogniser's four-point boxes, rotated by the page's median skew (from
    the top edges of the long boxes) so that rows and columns run straight."""
    items = []
    for points, text, score in zip(quads, texts, scores):
        text = " ".join(str(text).split())
        if text:
            items.append(([(float(p[0]), float(p[1])) for p in points], text, float(score)))
    angles = []
    for points, _, _ in items:
        (x0, y0), (x1, y1) = points[0], points[1]
        height = math.dist(points[0], points[3])
        if x1 - x0 > 3 * max(height, 1.0):
            angles.append(math.atan2(y1 - y0, x1 - x0))
    angle = statistics.median(angles) if angles else 0.0
    cos, sin = math.cos(-angle), math.sin(-angle)
    lines = []
    for points, text, score in items:
        if angle:
            points = [(x * cos - y * sin, x * sin + y * cos) for x, y in points]
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        lines.append(OcrLine(text, score, (min(xs), min(ys), max(xs), max(ys))))
    return lines


def split_at_gutters(lines: list[OcrLine]) -> list[OcrLine]:
    """Lines the detector ran across a narrow gutter cut in two. A gutter is where two or more
    lines nearby, no smaller than this one and one of them on the next row, start inside its
    span, with lines nearby ending just before it and fewer lines crossing it than starting
    there; the text is cut at the word (or, in CJK, the character) nearest the gutter's place in
    the box."""
    if len(lines) < 3:
        return lines
    typical = statistics.median(line.height for line in lines) or 1.0
    out: list[OcrLine] = []
    pending = list(lines)
    while pending:
        line = pending.pop()
        cut = _gutter(line, lines, typical)
        pieces = _cut(line, *cut) if cut else None
        if pieces is None:
            out.append(line)
        else:
            pending.extend(pieces)
    return out


def _gutter(line: OcrLine, lines: list[OcrLine], typical: float) -> tuple[float, float] | None:
    left, top, right, bottom = line.box
    near = [o for o in lines if o is not line and o.box[1] < bottom + 8 * typical and o.box[3] > top - 8 * typical]
    starts = sorted(o.box[0] for o in near if left + 2 * typical < o.box[0] < right - 2 * typical)
    for k in range(len(starts) - 1):
        start = starts[k]
        if starts[k + 1] - start > 0.5 * typical:
            continue
        starters = [o for o in near if abs(o.box[0] - start) <= 0.5 * typical]
        starting = len(starters)
        if line.height > 1.2 * statistics.median(o.height for o in starters):
            continue  # a title over the columns, set larger than they are
        if not any(o.box[1] - bottom < typical and top - o.box[3] < typical for o in starters):
            continue  # no column line on the next row: a footer or a heading under the columns
        ends = [o.box[2] for o in near if start - 4 * typical < o.box[2] < start and o.box[0] < start - 2 * typical]
        crossing = sum(1 for o in near if o.box[0] < start - typical and o.box[2] > start + typical)
        if ends and starting >= 2 and crossing < starting:
            return max(ends), start
    return None


# Letters' widths relative to a typical one, to place a character in its box: "in the" is narrower
# than "mower", and a cut guessed from character counts alone fell a word off (WenQuanYi Zen Hei's
# three-column page put "the" at the head of the next column).
_NARROW = frozenset(" iljtfrI.,:;'!|()[]-")
_BROAD = frozenset("mwMW")


def _advance(ch: str) -> float:
    if is_wide(ch):
        return 2.0
    if ch in _NARROW:
        return 0.5
    if ch in _BROAD:
        return 1.5
    return 1.2 if ch.isupper() else 1.0


def _cut(line: OcrLine, end: float, start: float) -> list[OcrLine] | None:
    """`line` cut between x = end and x = start, at the word or CJK character nearest the gutter
    (half a line height before the next column): a line the detector ran across the gutter is long
    enough to reach it, so its column's shorter lines (which end at `end`) tell only where it
    cannot end."""
    left, top, right, bottom = line.box
    text = line.text
    target = max(end, start - 0.5 * (bottom - top))
    widths = [_advance(ch) for ch in text]
    total = sum(widths)
    best: tuple[float, int, int] | None = None  # (distance, cut before, resume at)
    run = 0
    for index, ch in enumerate(text):
        x = left + (right - left) * run / total
        if ch == " " and index:
            candidate = (abs(x - target), index, index + 1)
        elif index and (is_wide(ch) or is_wide(text[index - 1])):
            candidate = (abs(x - target), index, index)
        else:
            candidate = None
        if candidate and (best is None or candidate[0] < best[0]):
            best = candidate
        run += widths[index]
    if best is None or best[0] > 0.25 * (right - left):
        return None
    head, tail = text[: best[1]].strip(), text[best[2]:].strip()
    if not head or not tail:
        return None
    return [OcrLine(head, line.score, (left, top, end, bottom)), OcrLine(tail, line.score, (start, top, right, bottom))]


# ---------------------------------------------------------------------------------------------
# Joining text


def join_text(left: str, right: str) -> str:
    """Two pieces of one line or paragraph: nothing between CJK and anything (Chinese has no
    spaces, not even around a Latin name), a word hyphenated across lines re-joined, otherwise a
    space."""
    if not left:
        return right
    if not right:
        return left
    if is_wide(left[-1]) or is_wide(right[0]):
        return left + right
    if left.endswith("-") and len(left) > 1 and left[-2].isalpha() and right[0].islower():
        return left[:-1] + right
    return left + " " + right


def _join_boxes(lines: list[OcrLine]) -> str:
    """The boxes of one row, left to right. Latin pieces always get a space between them: the
    detector splits a line at a space, and its padded boxes then touch or overlap, so how close
    two boxes are says nothing about a space between them."""
    text = ""
    for line in sorted(lines, key=lambda item: item.box[0]):
        text = join_text(text, line.text)
    return text


# ---------------------------------------------------------------------------------------------
# Units: a line (boxes of one row that nearly touch) or a table


@dataclass
class _Unit:
    box: Box
    text: str
    height: float
    rows: tuple[tuple[str, ...], ...] = ()
    form: bool = False

    @property
    def middle(self) -> float:
        return (self.box[1] + self.box[3]) / 2

    @property
    def width(self) -> float:
        return self.box[2] - self.box[0]

    @property
    def pitch(self) -> float:
        """Width per character (a CJK character counts two): the type size, free of the
        detector's padding, which makes a short box look taller than its text."""
        return self.width / max(1, display_width(self.text))


def _envelope(boxes: list[Box]) -> Box:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def _rows(lines: list[OcrLine]) -> list[list[OcrLine]]:
    """Boxes grouped into rows by their vertical middles, top to bottom, each row left to right."""
    rows: list[list[OcrLine]] = []
    middles: list[float] = []
    for line in sorted(lines, key=lambda item: ((item.box[1] + item.box[3]) / 2, item.box[0])):
        middle = (line.box[1] + line.box[3]) / 2
        if rows:
            reach = 0.5 * min(line.height, statistics.median(b.height for b in rows[-1]))
            if abs(middle - middles[-1]) < reach:
                rows[-1].append(line)
                middles[-1] = statistics.fmean((b.box[1] + b.box[3]) / 2 for b in rows[-1])
                continue
        rows.append([line])
        middles.append(middle)
    for row in rows:
        row.sort(key=lambda item: item.box[0])
    return rows


def _cells(row: list[OcrLine], typical: float) -> list[_Unit]:
    """A row's boxes, those closer than a word gap merged into one line."""
    groups: list[list[OcrLine]] = []
    for line in row:
        if groups and line.box[0] - groups[-1][-1].box[2] < 0.6 * typical:
            groups[-1].append(line)
        else:
            groups.append([line])
    return [_Unit(_envelope([g.box for g in group]), _join_boxes(group),
                  statistics.median(g.height for g in group)) for group in groups]


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    return min(a[1], b[1]) - max(a[0], b[0])


class _Grid:
    """Rows of cells that fall into the same columns (a table while it grows)."""

    def __init__(self, cells: list[_Unit]) -> None:
        self.columns: list[list[float]] = [[c.box[0], c.box[2]] for c in cells]
        self.rows: list[dict[int, list[_Unit]]] = [{i: [c] for i, c in enumerate(cells)}]
        self.bottom = max(c.box[3] for c in cells)

    def _place(self, cells: list[_Unit]) -> list[int] | None:
        """The column of each cell, or None when a cell straddles columns or two share one."""
        placed: list[int] = []
        for cell in cells:
            span = (cell.box[0], cell.box[2])
            hits = [i for i, col in enumerate(self.columns) if _overlap((col[0], col[1]), span) > 0]
            if len(hits) > 1:
                return None
            placed.append(hits[0] if hits else -1)
        taken = [p for p in placed if p >= 0]
        return placed if len(taken) == len(set(taken)) else None

    def add_row(self, cells: list[_Unit]) -> bool:
        placed = self._place(cells)
        if placed is None:
            return False
        for cell, column in zip(cells, placed):
            if column < 0:  # a cell in a new column: insert it where it belongs in x order
                at = sum(1 for col in self.columns if col[1] <= cell.box[0])
                self.columns.insert(at, [cell.box[0], cell.box[2]])
                self.rows = [{(k + 1 if k >= at else k): v for k, v in r.items()} for r in self.rows]
        row: dict[int, list[_Unit]] = {}
        for cell, column in zip(cells, self._place(cells) or []):
            self.columns[column][0] = min(self.columns[column][0], cell.box[0])
            self.columns[column][1] = max(self.columns[column][1], cell.box[2])
            row[column] = [cell]
        self.rows.append(row)
        self.bottom = max(c.box[3] for c in cells)
        return True

    def add_continuation(self, cell: _Unit, typical: float) -> bool:
        """A single line just under the last row, inside one column: the next line of that cell."""
        if cell.box[1] - self.bottom > 0.6 * typical:
            return False
        placed = self._place([cell])
        if placed is None or placed[0] < 0 or placed[0] not in self.rows[-1]:
            return False
        self.rows[-1][placed[0]].append(cell)
        self.bottom = cell.box[3]
        return True

    def is_table(self) -> bool:
        if len(self.rows) < 2 or len(self.columns) < 2:
            return False
        prose = 0
        for column, (left, right) in enumerate(self.columns):
            lines = [c for row in self.rows for c in row.get(column, ())]
            if not lines:
                continue
            if _wrapped(lines, right - left):
                return False  # a column of running text beside a list: lines, not a table
            if statistics.median(display_width(c.text) for c in lines) >= _PROSE_WIDTH:
                prose += 1
        return prose < len(self.columns)

    def unit(self) -> _Unit:
        cells = [c for row in self.rows for group in row.values() for c in group]
        rows = tuple(tuple(_cell_text(row.get(k, [])) for k in range(len(self.columns))) for row in self.rows)
        form = any(all(r[k].endswith((":", "：")) for r in rows if r[k]) and any(r[k] for r in rows)
                   for k in range(len(self.columns) - 1))
        return _Unit(_envelope([c.box for c in cells]), "", statistics.median(c.height for c in cells),
                     rows=rows, form=form)


def _wrapped(lines: list[_Unit], width: float) -> bool:
    """Most lines of a column run on into the next (no sentence end, long, and the next one goes
    on in lower case or, in CJK, the line fills the column): a paragraph wrapped, not cells."""
    pairs = list(zip(lines, lines[1:]))
    wraps = 0
    for above, below in pairs:
        a, b = above.text, below.text
        if a[-1] in _SENTENCE_END or display_width(a) < _PROSE_WIDTH:
            continue
        if b[0].islower() or (is_wide(a[-1]) and is_wide(b[0]) and above.width >= 0.85 * width):
            wraps += 1
    return wraps >= 2 and 2 * wraps >= len(pairs)


def _cell_text(lines: list[_Unit]) -> str:
    text = ""
    for line in lines:
        text = join_text(text, line.text)
    return text


def _units(lines: list[OcrLine], typical: float) -> list[_Unit]:
    """Lines and tables: runs of rows with two or more cells in shared columns become a table when
    not every column is running text (two text columns side by side stay lines)."""
    units: list[_Unit] = []
    grid: _Grid | None = None
    pending: list[_Unit] = []  # the lines of the grid being grown, should it not be a table

    def close() -> None:
        nonlocal grid, pending
        if grid is not None and grid.is_table():
            units.append(grid.unit())
        else:
            units.extend(pending)
        grid, pending = None, []

    for row in _rows(lines):
        cells = _cells(row, typical)
        if grid is not None:
            near = min(c.box[1] for c in cells) - grid.bottom < 2.5 * typical
            if near and ((len(cells) >= 2 and grid.add_row(cells))
                         or (len(cells) == 1 and grid.add_continuation(cells[0], typical))):
                pending.extend(cells)
                continue
            close()
        if len(cells) >= 2:
            grid = _Grid(cells)
            pending = list(cells)
        else:
            units.extend(cells)
    close()
    return units


# ---------------------------------------------------------------------------------------------
# Reading order


def _reading_order(units: list[_Unit], typical: float) -> list[_Unit]:
    """Breuel's partial order, sorted topologically (ties: the higher, then the more left, first),
    with one more rule: a line under two columns (a footer, a heading between sections) comes
    after everything above it, also a third column it does not reach."""
    n = len(units)
    if n < 2:
        return units
    if n > _MAX_ORDERED:
        return sorted(units, key=lambda u: (u.middle, u.box[0]))
    box = np.array([u.box for u in units], dtype=np.float64)
    left, top, right, bottom = box.T
    middle = (top + bottom) / 2
    tolerance = 0.1 * typical
    shares = (np.minimum(right[:, None], right[None, :]) - np.maximum(left[:, None], left[None, :])) > tolerance
    above = middle[:, None] < middle[None, :]
    left_of = right[:, None] <= left[None, :] + tolerance
    spanned = np.zeros((n, n), dtype=bool)  # [a, b]: some c between them in height shares columns with both
    for a in np.flatnonzero(left_of.any(axis=1)):
        low, high = np.minimum(middle[a], middle), np.maximum(middle[a], middle)
        between = (middle[None, :] > low[:, None]) & (middle[None, :] < high[:, None])  # [b, c]
        spanned[a] = (between & shares[a][None, :] & shares).any(axis=1)
    before = (shares & above) | (left_of & ~spanned)
    over = bottom[:, None] <= top[None, :] + tolerance  # [u, f]: u ends above f begins
    for f in range(n):
        columns_above = np.flatnonzero(shares[:, f] & over[:, f])
        if columns_above.size > 1 and left_of[np.ix_(columns_above, columns_above)].any():
            before[over[:, f], f] = True
            before[f, over[:, f]] = False
    np.fill_diagonal(before, False)
    waiting = before.sum(axis=0)
    done = np.zeros(n, dtype=bool)
    order: list[int] = []
    keys = sorted(range(n), key=lambda i: (middle[i], left[i]))
    while len(order) < n:
        ready = [i for i in keys if not done[i] and waiting[i] == 0]
        if not ready:  # a cycle (overlapping boxes): take the least-blocked, highest unit
            ready = sorted((i for i in keys if not done[i]), key=lambda i: waiting[i])[:1]
        chosen = ready[0]
        done[chosen] = True
        order.append(chosen)
        waiting -= before[chosen]
    return [units[i] for i in order]


# ---------------------------------------------------------------------------------------------
# Paragraphs and headings


def read_page(lines: list[OcrLine]) -> list[Block]:
    """The blocks of one page or picture in reading order."""
    if not lines:
        return []
    lines = split_at_gutters(lines)
    typical = statistics.median(line.height for line in lines) or 1.0
    ordered = _reading_order(_units(lines, typical), typical)
    text_lines = [u for u in ordered if not u.rows]
    body = _body_size(text_lines, lambda u: u.height) or typical
    groups = _paragraphs(ordered, body)
    levels = _heading_levels(groups, body, _body_size(text_lines, lambda u: u.pitch))
    blocks: list[Block] = []
    for index, group in enumerate(groups):
        first = group[0]
        if first.rows:
            if first.form:
                blocks.append(Block("text", "\n".join(line for row in first.rows for line in _form_lines(row))))
            else:
                blocks.append(Block("table", "", rows=first.rows))
            continue
        text = ""
        for unit in group:
            text = join_text(text, unit.text)
        if index in levels:
            blocks.append(Block("heading", text, level=levels[index]))
        else:
            blocks.append(Block("text", text))
    return blocks


def _form_lines(row: tuple[str, ...]) -> list[str]:
    """A form's row: each "Label:" cell with the value after it, one pair a line."""
    lines: list[str] = []
    for cell in row:
        if not cell:
            continue
        if cell.endswith((":", "：")) or not lines:
            lines.append(cell)
        else:
            lines[-1] = join_text(lines[-1], cell)
    return lines


def _body_size(lines: list[_Unit], size: Callable[[_Unit], float]) -> float:
    """The size (height or pitch) of the text most characters are set in."""
    weighted = sorted((size(u), len(u.text)) for u in lines)
    total = sum(n for _, n in weighted)
    seen = 0
    for value, count in weighted:
        seen += count
        if seen * 2 >= total:
            return value
    return 0.0


def _paragraphs(ordered: list[_Unit], body: float) -> list[list[_Unit]]:
    """Consecutive lines of one column, close together and of one size, are a paragraph (and
    pieces of one row are one line); a short line that ends a sentence ends one."""
    groups: list[list[_Unit]] = []
    for unit in ordered:
        if groups and not unit.rows and not groups[-1][0].rows:
            group = groups[-1]
            last = group[-1]
            widest = max(u.width for u in group)
            below = 0 <= unit.box[1] - last.box[3] + 0.3 * body < 1.1 * body
            same_column = _overlap((last.box[0], last.box[2]), (unit.box[0], unit.box[2])) > 0
            same_size = max(unit.height, last.height) < _HEADING_RATIO * min(unit.height, last.height)
            short_end = last.width < 0.7 * max(widest, unit.width) and last.text[-1:] in _SENTENCE_END
            same_row = abs(unit.middle - last.middle) < 0.5 * min(unit.height, last.height) \
                and 0 <= unit.box[0] - last.box[2] < 4 * body  # one line the detector cut at a wide space
            if same_size and (same_row or (below and same_column and not short_end)):
                group.append(unit)
                continue
        groups.append([unit])
    return groups


def _heading_levels(groups: list[list[_Unit]], body: float, body_pitch: float) -> dict[int, int]:
    """Paragraph index → heading level. A heading is one or two short lines without a sentence
    end, set clearly larger than the body, or (the first paragraph of a page with more text)
    alone on its line."""
    sizes: dict[int, float] = {}
    for index, group in enumerate(groups):
        if group[0].rows or len(group) > 2:
            continue
        text = " ".join(u.text for u in group)
        if display_width(text) > _HEADING_MAX_WIDTH or text[-1] in _SENTENCE_END or text[-1] in ",，、:：":
            continue
        height = statistics.fmean(u.height for u in group)
        pitch = statistics.fmean(u.pitch for u in group)
        if height >= _HEADING_RATIO * body and pitch >= 1.15 * body_pitch:
            sizes[index] = height
        elif index == 0 and len(group) == 1 and len(groups) > 1 and display_width(text) <= 60:
            sizes[index] = float("inf")  # the page's title: above every other heading
    distinct: list[float] = []
    for height in sorted(sizes.values(), reverse=True):
        if not distinct or height < distinct[-1] / 1.15:
            distinct.append(height)
    return {index: 1 + next(k for k, h in enumerate(distinct) if height >= h / 1.15)
            for index, height in sizes.items()}
