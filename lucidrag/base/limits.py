"""Every limit that protects LucidRAG from hostile but legal files, in one place.

A file past a hard limit FAILS with a message that names the limit and says what to do; the
guards (long lines, wide tables, long headings and JSON paths) keep work and memory linear in
the file instead. README.md → "Limits" lists them for operators; keep the two in step.
"""

from __future__ import annotations

# Characters of text one uploaded file may hold after parsing (an archive counts all its
# members). 10 million is about the text of a 10 MB plain-text file, the largest upload
# LangBot's dialog accepts; only compressed formats (zip, xlsx, docx…) can go past it.
MAX_DOCUMENT_CHARS = 10_000_000

# ZIP archives (zip-in-zip counts against the same totals). The unpacked-bytes cap and the ratio
# also apply to Office files (.docx/.pptx/.xlsx/.ods are zips), images and media excepted.
ZIP_MAX_MEMBERS = 500
ZIP_MAX_UNPACKED_BYTES = 200 * 1024 * 1024
# Unpacked bytes per byte of archive. Text compresses 3-10×, repetitive logs and CSV up to ~50×;
# a zip bomb goes to 1,000×. Archives smaller than ZIP_RATIO_FLOOR_BYTES / ratio get the floor.
ZIP_MAX_RATIO = 100
ZIP_RATIO_FLOOR_BYTES = 10 * 1024 * 1024
ZIP_MAX_DEPTH = 1  # a zip inside a zip is opened; one more level down is skipped

# Chunking guards (lucidrag/ingestion/chunking.py).
# semantic-text-splitter's time grows with the square of a stretch without line or sentence
# breaks: lines longer than this many chunk sizes are cut before it (unbreakable runs into
# fixed windows).
LONG_LINE_FACTOR = 4
# A table whose header rows are longer than this share of chunk_size is cut into column groups
# (each repeating the first column) instead of repeating the whole header in every piece.
WIDE_TABLE_HEADER_SHARE = 0.5

# Parsing guards (lucidrag/parsing).
# Short rows are padded to the header width only in tables up to this many columns.
PAD_COLUMNS = 64
# A heading is prefixed to every chunk under it: longer headings are clipped to this.
MAX_HEADING_CHARS = 100
# A JSON leaf's "path.to.key" prefix is clipped (keeping its end) to this many characters.
MAX_JSON_PATH_CHARS = 200
