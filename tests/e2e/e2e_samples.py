"""Sample documents for the real-host E2E, written with the real writers, and its scenario.

    python tests/e2e/e2e_samples.py OUT_DIR     -> OUT_DIR/*.{txt,md,...} and OUT_DIR/scenario.json

Needs python-docx, python-pptx, openpyxl, reportlab and Pillow (requirements) and
a CJK font (tests/cjk_font.py; .ci/run installs one) for the scan and the picture. Every file holds
one or two made-up facts that no other file has, so a retrieval result can be attributed to
its file by text as well as by the host file id in its metadata.
"""
from __future__ import annotations

import csv
import json
import os
import sys

# ----------------------------------------------------------------------------- the documents

GBK_TXT = (
    "青石镇志\n\n"
    "青石镇位于群山环抱的河谷之中，镇上的居民世代以采石和种茶为生。"
    "镇东头的老灯塔建于清朝末年，是全镇最高的建筑。\n\n"
    "青石镇的守塔人名叫欧阳墨，他每年霜降那天都会点亮灯塔上的九盏铜灯，这个习俗已经延续了八十多年。\n\n"
    "每逢赶集的日子，附近村庄的茶农会把新茶挑到镇上的石板街出售，街边的茶馆里坐满了喝茶聊天的人。\n"
)

MD = (
    "# Quenby pump maintenance guide\n\n"
    "This guide covers routine maintenance of the Quenby irrigation pump used on the eastern farms.\n\n"
    "## Before starting the pump\n\n"
    "Check the oil level and make sure the intake screen is clear of leaves.\n"
    "The Zorblatt valve must be torqued to 47 newton-metres before the Quenby pump starts.\n\n"
    "## Seasonal storage\n\n"
    "Drain all water from the housing before the first frost and store the hoses indoors.\n"
)

HTML = (
    "<!DOCTYPE html><html><head><title>Marlowe lighthouse</title>"
    "<style>body { font-family: serif; }</style>"
    "<script>var tracking = 'should-never-be-indexed';</script></head><body>"
    "<nav><a href='/'>Home</a> | <a href='/about'>About</a></nav>"
    "<h1>The Marlowe lighthouse</h1>"
    "<p>The Marlowe lighthouse stands on a basalt cliff above the northern harbour.</p>"
    "<p>Every morning the Marlowe lighthouse keeper feeds seventeen ravens on the gallery rail.</p>"
    "<table><tr><th>Built</th><td>1871</td></tr><tr><th>Height</th><td>38 m</td></tr></table>"
    "<footer>Harbour heritage society</footer></body></html>\n"
)

PDF_LINES = [
    "Glaciology field report, northern survey",
    "",
    "Our team measured the terminus of six outlet glaciers during the expedition.",
    "The Vantablue glacier advanced 312 metres during the winter of 1887,",
    "according to the survey logbooks kept at the Hollin station.",
    "Most other glaciers in the survey retreated slowly over the same period.",
]

DOCX_PARAS = [
    ("heading", "Project Ostrich Feather"),
    ("p", "This memo summarises the launch plan agreed by the steering group."),
    ("p", "Project Ostrich Feather launches on the ninth of March in Reykjavik."),
    ("heading", "翡翠湖研究站"),
    ("p", "翡翠湖研究站的站长是林晓岚，她负责湖泊水质的长期监测工作。"),
]

PPTX_SLIDES = [
    ("Gribble submarine programme", "Deep-sea trials and crew training"),
    ("Trial results", "The Gribble submarine dives to a depth of 4200 fathoms.\nBattery endurance met the target."),
]

XLSX_ROWS = [
    ["Product", "Warehouse", "Stock"],
    ["Copper ladle", "Bergen depot", 140],
    ["Nimbus kettle", "Tromso depot", 8812],
    ["Linen apron", "Oslo depot", 57],
]

CSV_ROWS = [
    ["town", "mascot", "founded"],
    ["Pellucid Springs", "copper heron", "1743"],
    ["Dunmarrow", "grey badger", "1802"],
]

JSON_DOC = {
    "service": {"name": "quasar-relay", "owner": "Team Halcyon", "retry_budget": 93},
    "notes": "The quasar-relay service is owned by Team Halcyon and forwards telemetry.",
}

ISOLATION_TXT = (
    "The Kestrel observatory on Mount Varnhold catalogued 5150 comets over four decades. "
    "Its astronomers used a refracting telescope with a brass tube.\n"
)

# Scans and pictures (read by OCR): page 2 of the scan holds the fact, to check its page citation.
SCAN_PAGES = [
    ["Corvex plant handbook", "This handbook describes the boiler house of the Corvex plant."],
    ["Keys and access", "The Corvex boiler room key is kept in locker 88 at the gatehouse."],
]
PICTURE_LINES = ["Harbour notice", "Ferry tickets to Skellig Rock cost 14 euros for adults."]

# not a PDF at all, and not valid UTF-8 either: the engine must report "failed" with a message
CORRUPT_PDF = b"%PDF-1.7\n\xff\xfe\x00\x81garbage-not-a-pdf\x00\xc3\x28" * 8


# ----------------------------------------------------------------------------- writers


def write_pdf(path: str) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(path, pagesize=A4)
    c.setTitle("Glaciology field report")
    y = 800
    for line in PDF_LINES:
        c.drawString(72, y, line)
        y -= 18
    c.showPage()
    c.save()


def _ocr_samples():  # noqa: ANN202 - the tests.ocr_samples module
    """tests/ocr_samples.py: pages of text as a scanner would see them (the OCR unit tests' pages)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if root not in sys.path:
        sys.path.insert(0, root)
    from tests import ocr_samples

    return ocr_samples


def write_scanned_pdf(path: str) -> None:
    samples = _ocr_samples()
    with open(path, "wb") as f:
        f.write(samples.scanned_pdf([samples.render(p, dpi=150) for p in SCAN_PAGES]))


def write_png(path: str) -> None:
    _ocr_samples().render(PICTURE_LINES, dpi=150).save(path, "PNG")


def write_docx(path: str) -> None:
    import docx

    d = docx.Document()
    for kind, text in DOCX_PARAS:
        if kind == "heading":
            d.add_heading(text, level=1)
        else:
            d.add_paragraph(text)
    t = d.add_table(rows=2, cols=2)
    t.cell(0, 0).text, t.cell(0, 1).text = "Owner", "Steering group"
    t.cell(1, 0).text, t.cell(1, 1).text = "Budget", "Approved"
    d.save(path)


def write_pptx(path: str) -> None:
    from pptx import Presentation

    p = Presentation()
    for title, body in PPTX_SLIDES:
        s = p.slides.add_slide(p.slide_layouts[1])
        s.shapes.title.text = title
        s.placeholders[1].text_frame.text = body
    p.save(path)


def write_xlsx(path: str) -> None:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = "Inventory"
    for row in XLSX_ROWS:
        ws.append(row)
    wb.save(path)


def generate(out: str) -> dict:
    os.makedirs(out, exist_ok=True)
    p = lambda n: os.path.join(out, n)  # noqa: E731
    with open(p("qingshi_gbk.txt"), "wb") as f:
        f.write(GBK_TXT.encode("gbk"))
    with open(p("quenby_pump.md"), "w", encoding="utf-8") as f:
        f.write(MD)
    with open(p("marlowe.html"), "w", encoding="utf-8") as f:
        f.write(HTML)
    write_pdf(p("glacier_report.pdf"))
    write_docx(p("ostrich_memo.docx"))
    write_pptx(p("gribble_deck.pptx"))
    write_xlsx(p("inventory.xlsx"))
    with open(p("towns.csv"), "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(CSV_ROWS)
    with open(p("quasar.json"), "w", encoding="utf-8") as f:
        json.dump(JSON_DOC, f, indent=2)
    with open(p("kestrel.txt"), "w", encoding="utf-8") as f:
        f.write(ISOLATION_TXT)
    with open(p("corrupt.pdf"), "wb") as f:
        f.write(CORRUPT_PDF)
    write_scanned_pdf(p("corvex_scan.pdf"))
    write_png(p("harbour_notice.png"))

    def fe(name: str, facts: list[str], bad: bool = False) -> dict:
        return {"path": p(name), "name": name, "facts": facts, "bad": bad}

    sc = {
        "files": [
            fe("qingshi_gbk.txt", ["欧阳墨"]),
            fe("quenby_pump.md", ["Zorblatt"]),
            fe("marlowe.html", ["seventeen ravens"]),
            fe("glacier_report.pdf", ["Vantablue"]),
            fe("ostrich_memo.docx", ["Ostrich Feather", "林晓岚"]),
            fe("gribble_deck.pptx", ["4200 fathoms"]),
            fe("inventory.xlsx", ["Nimbus kettle"]),
            fe("towns.csv", ["Pellucid Springs"]),
            fe("quasar.json", ["Halcyon"]),
            fe("corvex_scan.pdf", ["locker 88"]),
            fe("harbour_notice.png", ["Skellig Rock"]),
            fe("corrupt.pdf", [], bad=True),
        ],
        "queries": [
            {"query": "青石镇的守塔人叫什么名字？", "expect_file": "qingshi_gbk.txt", "expect_text": "欧阳墨"},
            {"query": "What torque does the Zorblatt valve need before the Quenby pump starts?",
             "expect_file": "quenby_pump.md", "expect_text": "47 newton"},
            {"query": "How many ravens does the Marlowe lighthouse keeper feed?",
             "expect_file": "marlowe.html", "expect_text": "seventeen ravens"},
            {"query": "How far did the Vantablue glacier advance in 1887?",
             "expect_file": "glacier_report.pdf", "expect_text": "312 metres"},
            {"query": "When and where does Project Ostrich Feather launch?",
             "expect_file": "ostrich_memo.docx", "expect_text": "Reykjavik"},
            {"query": "翡翠湖研究站的站长是谁？", "expect_file": "ostrich_memo.docx", "expect_text": "林晓岚"},
            {"query": "How deep does the Gribble submarine dive?",
             "expect_file": "gribble_deck.pptx", "expect_text": "4200 fathoms"},
            {"query": "How many Nimbus kettle units are in stock at the Tromso depot?",
             "expect_file": "inventory.xlsx", "expect_text": "8812"},
            {"query": "What is the mascot of Pellucid Springs?", "expect_file": "towns.csv",
             "expect_text": "copper heron"},
            {"query": "Which team owns the quasar-relay service?", "expect_file": "quasar.json",
             "expect_text": "Halcyon"},
            {"query": "Where is the Corvex boiler room key kept?", "expect_file": "corvex_scan.pdf",
             "expect_text": "locker 88"},
            {"query": "How much is a ferry ticket to Skellig Rock?", "expect_file": "harbour_notice.png",
             "expect_text": "14 euros"},
        ],
        # edited retrieval settings are checked with this question
        "settings_query": {"query": "What torque does the Zorblatt valve need before the Quenby pump starts?",
                           "expect_file": "quenby_pump.md", "expect_text": "Zorblatt"},
        "keyword_query": {"query": "Vantablue", "expect_file": "glacier_report.pdf", "expect_text": "Vantablue"},
        "delete_file": "quenby_pump.md",
        # the browser journey drags this picture onto the upload box (the picker offers no pictures)
        "browser_drop": {"name": "harbour_notice.png", "query": "How much is a ferry ticket to Skellig Rock?",
                         "expect_text": "14 euros"},
        # the HTML page's <script>/<style> must not be indexed as text
        "never_text": ["should-never-be-indexed", "font-family"],
        "isolation": {
            "files": [fe("kestrel.txt", ["Kestrel observatory"])],
            "queries": [{"query": "How many comets did the Kestrel observatory catalogue?",
                         "expect_file": "kestrel.txt", "expect_text": "5150 comets"}],
        },
        # a pipeline bound to KB A (tests/e2e/pipeline.py): what the LLM is sent
        "pipeline": {
            "questions": [
                # the source line of each passage: the document's name and page reach the model
                {"label": "en", "query": "How far did the Vantablue glacier advance in 1887?",
                 "expect_text": "312 metres", "expect_citation": ["Source: ", "Glaciology field report", "p. 1"]},
                {"label": "zh", "query": "翡翠湖研究站的站长是谁？", "expect_text": "林晓岚",
                 "expect_citation": ["来源：", "Project Ostrich Feather"], "expect_heading_once": "翡翠湖研究站"},
                {"label": "scan", "query": "Where is the Corvex boiler room key kept?",
                 "expect_text": "locker 88", "expect_citation": ["Source: ", "p. 2"]},
                {"label": "picture", "query": "How much is a ferry ticket to Skellig Rock?",
                 "expect_text": "14 euros", "expect_citation": ["Source: "]},
            ],
            "deleted": {"query": "What torque does the Zorblatt valve need before the Quenby pump starts?",
                        "expect_text": "47 newton"},
        },
        # the agent's tools on pipelines bound to KB A and to KB B (tests/e2e/pipeline.py)
        "agent_tools": {
            "search": {"query": "How far did the Vantablue glacier advance?", "file": "glacier_report.pdf",
                       "file_title": "Glaciology field report", "page": 1, "expect_text": "312 metres",
                       "expect_source": "Glaciology field report"},
            "kb_b_text": "5150 comets",
        },
        "creation_settings": {"chunking": "structure", "chunk_size": 512, "chunk_overlap": 64},
        "expect_creation_fields": ["embedding_model_uuid", "chunking", "chunk_size", "chunk_overlap"],
        "expect_retrieval_fields": ["top_k", "search_mode", "vector_weight", "score_threshold",
                                    "rerank_model_uuid", "context_window", "query_log", "query_log_size",
                                    "source_line"],
        "ingest_timeout_s": 300,
    }
    with open(p("scenario.json"), "w", encoding="utf-8") as f:
        json.dump(sc, f, ensure_ascii=False, indent=2)
    return sc


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: e2e_samples.py OUT_DIR")
    generate(sys.argv[1])
    print(os.path.join(sys.argv[1], "scenario.json"))
