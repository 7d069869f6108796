"""Files for the runtime stages (tests/e2e/runtime_stages.py), written at run time with real writers.

    python tests/e2e/runtime_samples.py OUT_DIR     -> OUT_DIR/*.{pdf,docx,txt,csv,xlsx} and OUT_DIR/runtime.json

Runs in the dev venv (reportlab, python-docx, Pillow; requirements-dev.txt). Everything comes from a
seeded generator, so every run uploads the same bytes. Office files get their size the way real ones
do, from an embedded picture (incompressible noise), and carry a few pages of text; text and CSV
files are text all the way through. Each file holds one made-up fact that no other file has.
"""
from __future__ import annotations

import csv
import io
import json
import os
import random
import sys

SEED = 20261203
WORDS = """harbour ledger quarry mill orchard lantern ferry granary bellows anvil tannery cooper
weaver kiln barge furnace sluice cistern aqueduct almanac tithe warden steward reeve bailiff
parish chapel market fair guild charter levy toll bridge causeway dyke polder meadow pasture
fallow harvest threshing winnow sheaf bushel peck firkin hogshead cask wagon cart axle spoke
hub felloe harness saddle bridle stirrup smithy forge hammer tongs bellows ingot copper tin
pewter brass bronze iron steel timber plank beam rafter thatch slate shingle mortar lime
chalk flint clay loam silt gravel shale basalt granite marble quartz""".split()
ZH_PHRASES = ("河谷里的石板路通向古老的渡口", "茶农在清晨挑着新茶赶往集市", "镇上的铁匠铺整日传出打铁的声音",
              "老人们在榕树下讲述从前的故事", "春雨过后山坡上开满了杜鹃花", "渡船沿着河道缓缓驶向下游的村庄",
              "粮仓里堆满了秋天收获的稻谷", "学堂的钟声在午后准时响起")

# (name, kind, target bytes, fact, query)
CONCURRENT = [
    ("rt_ledger_en.txt", "txt", 1_050_000, "The Brackenfold ferry toll was eleven copper pennies.",
     "What was the Brackenfold ferry toll?"),
    ("rt_zhenzhi_zh.txt", "txt_zh", 1_050_000, "守桥人名叫司徒青岚，她在霜降那天修好了石拱桥。",
     "守桥人叫什么名字"),
    ("rt_inventory_a.csv", "csv", 1_050_000, "Quillmere depot holds 4471 pewter tankards",
     "How many pewter tankards does the Quillmere depot hold?"),
    ("rt_inventory_b.csv", "csv", 1_100_000, "Ostervik depot holds 9083 bronze lanterns",
     "How many bronze lanterns are at the Ostervik depot?"),
    ("rt_survey_a.pdf", "pdf", 1_300_000, "The Harrowgate aqueduct carries 812 barrels of water each hour.",
     "How much water does the Harrowgate aqueduct carry?"),
    ("rt_survey_b.pdf", "pdf", 2_400_000, "The Ellisford granary was rebuilt with Welsh slate in 1794.",
     "When was the Ellisford granary rebuilt?"),
    ("rt_memo_a.docx", "docx", 1_200_000, "Steward Orla Pennyweather signed the Saltmarsh charter.",
     "Who signed the Saltmarsh charter?"),
    ("rt_memo_b.docx", "docx", 2_900_000, "The Kestrel Moor kiln fires bricks at 1150 degrees.",
     "At what temperature does the Kestrel Moor kiln fire bricks?"),
]
# killed mid-upsert: ~600 chunks at the stage's chunk_size 256, so six upsert batches of 100
KILL = ("rt_kill_ledger.txt", "txt", 150_000, "The Wendlebury sluice opens at the third bell.",
        "When does the Wendlebury sluice open?")
# completed in the same KB first, so a retrieve there has something to return
KILL_COMPANION = ("rt_kill_companion.txt", "txt", 6_000, "The Hollowmere tannery closes on the first frost.",
                  "When does the Hollowmere tannery close?")
# the flaky embedder: small files, several embedding requests each
FLAKY = [
    (f"rt_flaky_{i}.{ext}", kind, size, fact, "")
    for i, (ext, kind, size, fact) in enumerate([
        ("txt", "txt", 30_000, "The Marrowby bellows were patched with calfskin."),
        ("txt", "txt", 40_000, "Reeve Tamsin Halloway kept the Fenwick almanac."),
        ("csv", "csv", 30_000, "Dunholt depot holds 306 iron anvils"),
        ("docx", "docx", 100_000, "The Cresswell barge carried forty sheaves of barley."),
        ("pdf", "pdf", 100_000, "The Ashcombe forge was founded by Wilmot Greaves."),
        ("txt", "txt_zh", 40_000, "渡口的船夫名叫欧阳青松，他每天摆渡四十趟。"),
    ])
]


def _sentences(rng: random.Random):
    while True:
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 18))]
        yield " ".join(words).capitalize() + "."


def _english(rng: random.Random, n_bytes: int, fact: str) -> str:
    out, size, para, gen = [], 0, [], _sentences(rng)
    half = n_bytes // 2
    placed = False
    while size < n_bytes:
        s = next(gen)
        if not placed and size >= half:
            s, placed = fact, True
        para.append(s)
        size += len(s) + 1
        if len(para) >= 6:
            out.append(" ".join(para))
            para = []
    out.append(" ".join(para))
    return "\n\n".join(out) + "\n"


def _chinese(rng: random.Random, n_bytes: int, fact: str) -> str:
    out, size, placed = [], 0, False
    while size < n_bytes:
        para = "，".join(rng.choice(ZH_PHRASES) for _ in range(rng.randint(3, 6))) + "。"
        if not placed and size >= n_bytes // 2:
            para, placed = fact, True
        out.append(para)
        size += len(para.encode("utf-8")) + 1
    return "\n".join(out) + "\n"


def _noise_png(rng: random.Random, n_bytes: int) -> bytes:
    from PIL import Image

    side = max(16, int((n_bytes / 3) ** 0.5))
    img = Image.frombytes("RGB", (side, side), rng.randbytes(side * side * 3))
    buf = io.BytesIO()
    img.save(buf, "PNG", compress_level=1)
    return buf.getvalue()


def _write_csv(path: str, rng: random.Random, n_bytes: int, fact: str) -> None:
    # fact "X depot holds N things" -> one row that states it
    depot, rest = fact.split(" depot holds ")
    qty, item = rest.split(" ", 1)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["row", "depot", "item", "quantity", "note"])
        i, placed = 0, False
        while f.tell() < n_bytes:
            if not placed and f.tell() >= n_bytes // 2:
                w.writerow([i, depot, item, qty, fact])
                placed = True
            else:
                w.writerow([i, rng.choice(WORDS).capitalize() + "ton", rng.choice(WORDS), rng.randint(1, 999),
                            " ".join(rng.choice(WORDS) for _ in range(6))])
            i += 1


def _write_docx(path: str, rng: random.Random, n_bytes: int, fact: str) -> None:
    import docx
    from docx.shared import Inches

    d = docx.Document()
    d.add_heading("Estate memorandum", 1)
    text = _english(rng, min(40_000, n_bytes // 4), fact)
    for i, para in enumerate(text.split("\n\n")):
        if i % 12 == 0:
            d.add_heading(f"Section {i // 12 + 1}", 2)
        d.add_paragraph(para)
    d.add_picture(io.BytesIO(_noise_png(rng, n_bytes - len(text))), width=Inches(5))
    d.save(path)


def _write_pdf(path: str, rng: random.Random, n_bytes: int, fact: str) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(path, pagesize=A4)
    width, height = A4
    text = _english(rng, min(40_000, n_bytes // 4), fact)
    c.drawImage(ImageReader(io.BytesIO(_noise_png(rng, n_bytes - len(text)))), 60, 300, 470, 470)
    c.showPage()
    lines = []
    for para in text.split("\n\n"):
        words, line = para.split(), ""
        for w in words:  # the fact must stay on one page; sentences wrap at ~90 characters
            if len(line) + len(w) > 90:
                lines.append(line)
                line = ""
            line += w + " "
        lines.extend([line, ""])
    y = height - 60
    for line in lines:
        if y < 60:
            c.showPage()
            y = height - 60
        c.drawString(50, y, line.strip())
        y -= 14
    c.save()


def write_file(out: str, name: str, kind: str, n_bytes: int, fact: str, seed: int) -> str:
    rng = random.Random(seed)
    path = os.path.join(out, name)
    if kind == "txt":
        with open(path, "w", encoding="utf-8") as f:
            f.write(_english(rng, n_bytes, fact))
    elif kind == "txt_zh":
        with open(path, "w", encoding="utf-8") as f:
            f.write(_chinese(rng, n_bytes, fact))
    elif kind == "csv":
        _write_csv(path, rng, n_bytes, fact)
    elif kind == "docx":
        _write_docx(path, rng, n_bytes, fact)
    elif kind == "pdf":
        _write_pdf(path, rng, n_bytes, fact)
    else:
        raise ValueError(kind)
    return path


# the isolation stage: a spreadsheet whose reader aborts the process that reads it (one cell at
# XFD1048576: python-calamine allocates the dense 16,384 x 1,048,576 grid, 512 GiB, and aborts),
# uploaded beside an ordinary file into another KB at the same moment
ISOLATION_NORMAL = ("rt_isolation_notes.txt", "txt", 4_000, "The Brindlecombe lighthouse keeper logs the tides at dusk.",
                    "Who logs the tides at Brindlecombe?")


def sheet_that_aborts_its_reader(out: str) -> str:
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet["A1"], sheet["B1"], sheet["A2"], sheet["B2"] = "Product", "Price", "Oolong tea", 12
    sheet["XFD1048576"] = "end"
    path = os.path.join(out, "rt_isolation_prices.xlsx")
    workbook.save(path)
    return path


def generate(out: str) -> str:
    """Write every file and OUT/runtime.json (what runtime_stages.py reads); returns its path."""
    os.makedirs(out, exist_ok=True)

    def entries(specs, base):
        return [{"path": write_file(out, name, kind, size, fact, SEED + base + i), "name": name, "fact": fact,
                 "query": query} for i, (name, kind, size, fact, query) in enumerate(specs)]

    manifest = {"concurrent": entries(CONCURRENT, 0), "kill": entries([KILL], 100)[0],
                "kill_companion": entries([KILL_COMPANION], 150)[0], "flaky": entries(FLAKY, 200),
                "isolation": {"hostile": {"path": sheet_that_aborts_its_reader(out), "name": "rt_isolation_prices.xlsx",
                                          "fact": "", "query": ""},
                              "normal": entries([ISOLATION_NORMAL], 300)[0]}}
    path = os.path.join(out, "runtime.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(manifest, f, ensure_ascii=False, indent=1)
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(generate(sys.argv[1]))
