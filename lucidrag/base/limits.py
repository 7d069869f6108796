"""Every limit that protects LucidRAG from hostile but legal files, in one place.

A file past a hard limit FAILS with a message that names the limit and says what to do; the
guards (long lines, wide tables, long headings and JSON paths) keep work and memory linear in
the file instead. README.md → "Limits" lists them for operators (tests/test_readme_limits.py checks
the numbers).
"""

from __future__ import annotations

# Characters of text one uploaded file may hold after parsing (an archive counts all its
# members). 10 million is about the text of a 10 MB plain-text file, the largest upload
# LangBot's dialog accepts; only compressed formats (zip, xlsx, docx…) can go past it.
MAX_DOCUMENT_CHARS = 10_000_000

# ZIP archives (zip-in-zip counts against the same totals). The unpacked-bytes cap and the ratio
# also apply to Office files (.docx/.pptx/.xlsx/.ods are zips), every part counted, pictures and
# fonts included: python-docx and python-pptx read every part whole (a 0.6 MB .docx whose picture
# inflated to 600 MB held 1.2 GB). Parts are measured by decompressing them in bounded chunks
# before any reader sees them, never by the sizes the file declares.
ZIP_MAX_MEMBERS = 500
ZIP_MAX_UNPACKED_BYTES = 200 * 1024 * 1024
# Unpacked bytes per byte of archive. Text compresses 3-10×, repetitive logs and CSV up to ~50×;
# a zip bomb goes to 1,000×. Archives smaller than ZIP_RATIO_FLOOR_BYTES / ratio get the floor.
ZIP_MAX_RATIO = 100
ZIP_RATIO_FLOOR_BYTES = 10 * 1024 * 1024
ZIP_MAX_DEPTH = 1  # a zip inside a zip is opened; one more level down is skipped

# Limits checked while a file is read, before a reader allocates for it: together they keep one
# parse under ~512 MiB over idle whatever the file inflates to (docs/BENCHMARKS.md → "Hostile
# files" measures each format at LangBot's 10 MB upload limit).

# Office XML that a reader holds whole (every part of a .docx/.pptx but pictures and fonts, held
# as lxml trees by python-docx / python-pptx; a spreadsheet's shared strings and styles, its sheets
# are streamed): ~130 bytes per element (24 MB of empty paragraphs, 4 M elements, took 516 MB) and
# ~5 bytes per byte of text. Elements are counted while the parts are unpacked.
OFFICE_MAX_XML_BYTES = 64 * 1024 * 1024
OFFICE_MAX_XML_ELEMENTS = 2_500_000

# Spreadsheets: the reader (calamine) builds each sheet as a dense grid of 32-byte cells from its
# first to its last non-empty cell, however empty: one value at XFD1048576 makes 17 billion cells
# (512 GiB) and aborts the process in Rust, where nothing can catch it. The grid's size is counted
# from the sheet's XML first. 4 M cells: 128 MiB of grid (and up to 160 MiB more while the cells are
# read); a table's text takes ≥ 3 characters per cell, so MAX_DOCUMENT_CHARS fills ~3.3 M cells.
MAX_SHEET_CELLS = 4_000_000

# Text formats (.txt .csv .md .html .json .jsonl …, zip members too) are refused by size before
# they are parsed: once decoded, more than MAX_DOCUMENT_CHARS × TEXT_MARKUP_ALLOWANCE characters as
# written (a quarter more for JSON keys, HTML tags and Markdown marks: no upload LangBot accepts,
# 10 MB, is refused before its text is counted) fails before the parser builds anything, and more
# than TEXT_MAX_BYTES_PER_CHAR bytes per such character (UTF-8 takes at most 4) before decoding.
TEXT_MARKUP_ALLOWANCE = 1.25
TEXT_MAX_BYTES_PER_CHAR = 4
# One file inside a zip unpacks to at most this: only text compresses well enough to be larger in a
# 10 MB upload, and no text file this large fits in MAX_DOCUMENT_CHARS (40 MB = 10 M × 4 bytes).
ZIP_MAX_MEMBER_BYTES = MAX_DOCUMENT_CHARS * TEXT_MAX_BYTES_PER_CHAR
# HTML: BeautifulSoup and markdownify hold ~3 KB per tag (an ordinary 10 MB page of 210,000 tags
# grew by 635 MB while parsed and chunked), so a page holds at most this many tags.
MAX_HTML_TAGS = 150_000
# Elements nested deeper than this are read as the plain text they hold (the HTML-to-Markdown
# converter recurses once per level: 50,000 nested <div>s ended in RecursionError).
MAX_HTML_DEPTH = 128

# PDF: PDFium's time grows with the content streams it interprets, and pages that share one heavy
# stream each pay for it (a 10 KB file of 12 pages sharing 3.3 MB took 1.5 s per page). Before any
# text is extracted, the pages are counted and their content measured (decompressed in bounded
# chunks; a shared stream or form counted on every page that draws it): at most
# PDF_MAX_CONTENT_RATIO × the file's size (PDF_CONTENT_FLOOR_BYTES always allowed), and at most
# PDF_MAX_CONTENT_BYTES in all.
MAX_PDF_PAGES = 5_000
PDF_MAX_CONTENT_RATIO = 100
PDF_CONTENT_FLOOR_BYTES = 10 * 1024 * 1024
PDF_MAX_CONTENT_BYTES = 200 * 1024 * 1024

# Passages (chunks) one file may make: each is one text for the host's embedding model and one
# vector in the vector DB, so a 10 MB file of tiny sections or rows (~10^6 passages) would hold the
# model and the collection until the ingest deadline. Counted while the file is chunked, in its
# worker, before anything is embedded. 10 M characters of prose at the default chunk size make
# 21,500 (structure), 22,100 (fixed) or 48,400 (parent_child) passages, the 400,000-column CSV
# 32,600; a JSON Lines file makes one per record (10 MB of 100-character records: ~100,000, to be
# split in two). The plugin's own memory bounds it too: an ingest holds ~13 KB per passage at 1,536
# dimensions (a 20,000-passage upload peaked at 260 MiB), ~650 MiB at this limit. A hosted model
# (150 ms per 32 texts) embeds 50,000 in ~4 min; a local one at 30-40 texts/s not within the deadline.
MAX_CHUNKS_PER_FILE = 50_000

# Chunking guards (lucidrag/ingestion/chunking.py).
# semantic-text-splitter's time grows with the square of a stretch without line or sentence
# breaks: lines longer than this many chunk sizes are cut before it (unbreakable runs into
# fixed windows).
LONG_LINE_FACTOR = 4
# The splitter rescans the rest of its input for every chunk it cuts (quadratic in a section of
# many short lines): it is handed blocks of at most this many chunk sizes (_splitter_spans).
SPLITTER_BLOCK_FACTOR = 16
# A table whose header rows are longer than this share of chunk_size is cut into column groups
# (each repeating the first column) instead of repeating the whole header in every piece.
WIDE_TABLE_HEADER_SHARE = 0.5

# Parsing guards (lucidrag/parsing).
# Short rows are padded to the header width only in tables up to this many columns.
PAD_COLUMNS = 64
# A heading is prefixed to every chunk under it: longer headings are clipped to this.
MAX_HEADING_CHARS = 100
# A text's first line (chunking) or the line above an FAQ's first question (faqtext) is its
# title only up to this many characters.
TITLE_MAX_CHARS = 150
# A JSON leaf's "path.to.key" prefix is clipped (keeping its end) to this many characters.
MAX_JSON_PATH_CHARS = 200

# OCR (lucidrag/ingestion/parsing/ocr.py, images.py, pdf.py). Work and memory grow with pixels.
# A picture (an upload, a TIFF frame or a picture inside a document) larger than this fails
# before its pixels are decoded: 20,000 × 20,000 is 400 MP (1.2 GB as RGB); A4 at 600 dpi is 35 MP.
MAX_IMAGE_PIXELS = 60_000_000
# Pictures are scaled down to this longest side before OCR (a 300-dpi A4 page is 3508 px; the
# detector works at ~2000 px anyway, so more pixels only cost time).
OCR_MAX_SIDE = 3000
# Scanned PDF pages are rendered at this resolution for OCR.
OCR_DPI = 200
# Pages read by OCR in one file (scanned PDF pages, TIFF frames). ~1.5 s per page on 2 cores:
# 100 pages stay well inside LangBot's 1,200 s ingest timeout. A longer scan fails and says so.
MAX_OCR_PAGES = 100
# Pictures inside a document (.docx/.pptx/.pdf) read by OCR per file; the rest are skipped and
# the console says how many. Pictures smaller than OCR_MIN_PICTURE_PIXELS (icons, bullets,
# rules) are not read.
MAX_PICTURES_PER_FILE = 50
OCR_MIN_PICTURE_PIXELS = 96 * 32

# Vision model descriptions (optional creation setting; lucidrag/ingestion/vision.py) of pictures
# in which OCR found no text: at most this many per file, each call at most VISION_CALL_S, all of
# a file's calls together at most VISION_FILE_S; the picture is sent at most VISION_MAX_SIDE px on
# its longer side. Pictures smaller than VISION_MIN_SIDE on either side (icons, rules) are not sent.
MAX_VISION_PICTURES = 10
VISION_CALL_S = 30.0
VISION_FILE_S = 120.0
VISION_MAX_SIDE = 1024
VISION_MIN_SIDE = 64

# Every reader of an upload runs in a worker process (lucidrag/base/workers.py) whose address
# space is capped here (RLIMIT_AS; virtual memory, several times what it keeps resident): a file
# that makes its reader allocate past it fails with "… ran out of memory", the plugin lives on.
# Measured: a worker with the OCR models loaded maps 0.95 GiB at its peak reading an A4 scan, and
# 1.45 GiB (0.9 GiB resident) reading the largest picture MAX_IMAGE_PIXELS allows (58 MP).
PARSE_WORKER_MEMORY_MIB = 2048
