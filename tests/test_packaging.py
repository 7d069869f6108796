"""The plugin as LangBot loads it: manifest, component discovery, the built package."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from langbot_plugin.api.definition.components.manifest import ComponentManifest

import lucidrag

ROOT = Path(__file__).resolve().parent.parent
LANGS = {"en_US", "zh_Hans", "zh_Hant", "ja_JP"}


def load(path: str) -> dict:
    return yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))


def test_manifest_is_valid_for_the_sdk_and_declares_shared_runtime():
    manifest = load("manifest.yaml")
    parsed = ComponentManifest(owner="test", manifest=manifest, rel_path="manifest.yaml")
    assert parsed.metadata.name == "lucid-rag"
    assert LANGS <= set(manifest["metadata"]["label"]) and LANGS <= set(manifest["metadata"]["description"])
    assert (ROOT / manifest["metadata"]["icon"]).is_file()
    assert manifest["execution"]["sharedRuntime"] == "shared-runtime-v1"
    assert manifest["execution"]["componentModel"] == "stateless-v1"
    directory = manifest["spec"]["components"]["KnowledgeEngine"]["fromDirs"][0]["path"]
    component = load(directory + "lucid_rag.yaml")
    assert component["kind"] == "KnowledgeEngine"
    assert (ROOT / directory / component["execution"]["python"]["path"]).is_file()


def test_component_declares_ingestion_and_parsing():
    from components.knowledge_engine.lucid_rag import LucidRag

    assert set(LucidRag.get_capabilities()) == {"doc_ingestion", "doc_parsing"}


def test_main_plugin_class_is_importable_as_the_manifest_says():
    manifest = load("manifest.yaml")
    sys.path.insert(0, str(ROOT))
    module = __import__(Path(manifest["execution"]["python"]["path"]).stem)
    plugin = getattr(module, manifest["execution"]["python"]["attr"])()
    assert hasattr(plugin, "engine")


@pytest.mark.skipif(shutil.which("git") is None, reason="git is needed to list the shipped files")
def test_built_package_ships_the_plugin_but_not_tests_or_benchmarks(tmp_path):
    lbp = Path(sys.executable).with_name("lbp")
    if not lbp.exists():
        pytest.skip("lbp (langbot-plugin CLI) is not installed next to this python")
    subprocess.run(["bash", str(ROOT / "scripts/build.sh")], check=True, capture_output=True,
                   env={"LBP": str(lbp), "PATH": "/usr/bin:/bin"})
    package = max((ROOT / "dist").glob("*.lbpkg"), key=lambda p: p.stat().st_mtime)
    names = zipfile.ZipFile(package).namelist()
    assert "manifest.yaml" in names and "lucidrag/engine.py" in names
    assert "components/knowledge_engine/lucid_rag.py" in names
    assert {"components/tools/kb_tools.py", "components/tools/lucidrag_search.yaml", "lucidrag/agent/scope.py"} <= set(names)
    assert not [n for n in names if n.startswith(("tests/", "bench/", "scripts/", "docs/"))]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is needed to list the shipped files")
def test_a_source_archive_without_git_builds_the_same_package(tmp_path):
    """GitHub's "Download ZIP" has no .git: scripts/build.sh packs the same files from it."""
    lbp = Path(sys.executable).with_name("lbp")
    if not lbp.exists():
        pytest.skip("lbp (langbot-plugin CLI) is not installed next to this python")
    env = {"LBP": str(lbp), "PATH": "/usr/bin:/bin"}
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout.decode()
    archive = tmp_path / "lucidrag-main"
    for name in filter(None, tracked.split("\0")):
        if (ROOT / name).is_file():
            (archive / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, archive / name)
    (archive / "lucidrag/__pycache__").mkdir()
    (archive / "lucidrag/__pycache__/engine.cpython-311.pyc").write_bytes(b"stale")
    built = {}
    for tree in (ROOT, archive):
        subprocess.run(["bash", str(tree / "scripts/build.sh")], check=True, capture_output=True, env=env)
        package = max((tree / "dist").glob("*.lbpkg"), key=lambda p: p.stat().st_mtime)
        built[tree] = sorted(zipfile.ZipFile(package).namelist())
    assert "lucidrag/engine.py" in built[archive]
    assert built[archive] == built[ROOT]


def test_the_changelog_names_the_version_the_manifest_ships():
    versions = re.findall(r"^## (\d+\.\d+\.\d+)\b", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.MULTILINE)
    shipped = load("manifest.yaml")["metadata"]["version"]
    assert versions and versions[0] == shipped == lucidrag.__version__
    assert versions == sorted(versions, key=lambda v: tuple(map(int, v.split("."))), reverse=True)
