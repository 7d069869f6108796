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
# A worker with the OCR models loaded maps about 0.9 GiB while it reads a page (measured).
PARSE_WORKER_MEMORY_MIB = 2048
