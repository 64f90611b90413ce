"""The README is a front door: short, its links resolve, and its results table is exactly what
`scripts/results_table.py` writes from `benchmarks/results/` (no hand-edited figures)."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

from devicerl.config import config_source
from devicerl.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _script():
    spec = importlib.util.spec_from_file_location(
        "results_table", ROOT / "scripts/results_table.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _results(tmp_path: Path, *drop: str) -> Path:
    """A copy of benchmarks/results without the files matching the globs in `drop`."""
    results = tmp_path / "results"
    shutil.copytree(ROOT / "benchmarks/results", results)
    for pattern in drop:
        for old in results.glob(pattern):
            old.unlink()
    return results


def test_readme_table_is_what_the_script_writes() -> None:
    text = README.read_text()
    assert _script().render(text) == text, "run: python scripts/results_table.py"


def test_the_table_follows_the_result_files(tmp_path) -> None:
    results = _results(tmp_path)
    script = _script()
    before = script.table(results)
    data = json.loads((results / "pool_faults.json").read_text())
    data["ratio"] = 0.5
    (results / "pool_faults.json").write_text(json.dumps(data))
    after = script.table(results)
    assert before != after and "0.50 of the fault-free" in after


def test_each_setup_row_reads_the_newest_run_of_that_setup(tmp_path) -> None:
    results = _results(tmp_path)
    script = _script()
    runs = {p.name: json.loads(p.read_text()) for p in results.glob("learning-*.json")}
    name = max(
        n for n, d in runs.items() if script._LEARNING.match(n) and "paper" in d.get("setups", {})
    )
    tuned = dict(runs[name]["setups"]["tuned"])
    tuned["summary"]["digirl"]["mean"] = 0.1234
    (results / "learning-2099-01-01.json").write_text(json.dumps({"setups": {"tuned": tuned}}))
    rows = [r for r in script.table(results).splitlines() if r.startswith("| Learning (")]
    paper = next(r for r in rows if "(paper)" in r)
    assert f"`{name}`" in paper and "0.1234" not in paper  # the paper row stays
    new = next(r for r in rows if "(tuned)" in r)
    assert "DigiRL 0.123" in new and "`learning-2099-01-01.json`" in new


def test_the_agentlab_row_reads_each_protocols_newest_file(tmp_path) -> None:
    results = _results(tmp_path)
    script = _script()
    seeds = max(results.glob("agentlab-miniwob-seeds-*.txt")).read_text()
    newer = seeds.replace("system=digirl mean=0.134", "system=digirl mean=0.321")
    (results / "agentlab-miniwob-seeds-2099-01-01.txt").write_text(newer)
    row = next(r for r in script.table(results).splitlines() if "AgentLab's protocol" in r)
    assert "seeds: DigiRL 0.321" in row and "split: DigiRL " in row
    assert "`agentlab-miniwob-seeds-2099-01-01.txt`" in row and "GenericAgent rows" in row


def test_readme_is_short_and_its_links_resolve() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    assert "make demo" in text and "make test" in text
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert links, "the README links its docs pages"
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README links to missing files: {missing}"
    for page in (ROOT / "docs").glob("*.md"):
        for link in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / link).exists(), f"{page.name} links to missing {link}"


def test_every_config_file_the_docs_name_exists() -> None:
    """Setup files named by path and ``--config NAME`` words both resolve."""
    pages = [README, *(ROOT / "docs").glob("*.md")]
    texts = [page.read_text() for page in pages]
    named = {m for text in texts for m in re.findall(r"devicerl/configs/[\w.-]+\.yaml", text)}
    assert named, "the docs name config files"
    missing = sorted(name for name in named if not (ROOT / name).exists())
    assert not missing, f"docs name missing config files: {missing}"
    given = {m for text in texts for m in re.findall(r"--config ([\w-]+)(?=\s)", text)}
    assert "miniwob-digirl-tuned" in given, "the docs give shipped setups by name"
    unknown = []
    for name in sorted(given):
        try:
            config_source(name)
        except ConfigError:
            unknown.append(name)
    assert not unknown, f"docs give --config names that are no shipped setup: {unknown}"


def test_the_full_suite_row_reads_the_newest_budget_sized_run(tmp_path) -> None:
    results = _results(tmp_path, "miniwob-suite-????-??-??.json")
    script = _script()
    assert "| MiniWoB++ full suite |" not in script.table(results)  # -4k / -reduced: no row
    data = json.loads((results / "miniwob-suite-2026-11-23-4k.json").read_text())
    data["summary"]["suite_mean"], data["env_steps"] = 0.4321, 12345
    (results / "miniwob-suite-2099-01-01.json").write_text(json.dumps(data))
    row = next(r for r in script.table(results).splitlines() if "| MiniWoB++ full suite |" in r)
    assert "DigiRL 0.432 (9 tasks at human level)" in row and "12,345 env steps" in row
    assert "best pre-2022 0.646 (its 88 tasks)" in row and "miniwob-suite-2099-01-01.json" in row


def test_the_pretrained_full_suite_row_reads_the_newest_run_from_a_saved_agent(tmp_path) -> None:
    results = _results(tmp_path, "miniwob-suite-*.json")
    script = _script()
    label = "| MiniWoB++ full suite (pretrained) |"
    data = json.loads((ROOT / "benchmarks/results/miniwob-suite-2026-11-23-4k.json").read_text())
    data["summary"]["suite_mean"] = 0.4321
    data["command"] = ["python", "benchmarks/miniwob_suite.py", "agent.init_from=/a/agent"]
    (results / "miniwob-suite-2099-01-01-gated.json").write_text(json.dumps(data))
    untrained = dict(data, command=[*data["command"], "--untrained"])
    (results / "miniwob-suite-2099-02-01-start.json").write_text(json.dumps(untrained))
    scratch = dict(data, command=["python", "benchmarks/miniwob_suite.py"])
    (results / "miniwob-suite-2099-03-01-x.json").write_text(json.dumps(scratch))
    table = script.table(results)
    row = next(r for r in table.splitlines() if label in r)  # not the untrained or scratch runs
    assert "DigiRL 0.432" in row and "miniwob-suite-2099-01-01-gated.json" in row
    assert "| MiniWoB++ full suite |" not in table  # suffixed runs from scratch: no row
    fbc = dict(data, command=[*data["command"], "--algorithm", "filtered_bc"])
    fbc["summary"] = dict(data["summary"], suite_mean=0.2345)
    (results / "miniwob-suite-2099-04-01-fbc.json").write_text(json.dumps(fbc))
    row = next(r for r in script.table(results).splitlines() if label in r)
    assert "one DigiRL and one Filtered BC run" in row  # the newest run of each learner
    assert "DigiRL 0.432" in row and "Filtered BC 0.234" in row
    assert "`miniwob-suite-2099-01-01-gated.json`, `miniwob-suite-2099-04-01-fbc.json`" in row


def test_the_ablation_row_reads_the_newest_dev16_ablation(tmp_path) -> None:
    results = _results(tmp_path, "ablation-*.json")
    script = _script()
    assert "ablations" not in script.table(results)  # none committed: no row
    data = json.loads((results / "learning-dev16-2026-11-23.json").read_text())
    summary = data["setups"]["tuned"]["summary"]
    summary["digirl_no_critics"] = dict(summary["digirl"], mean=0.4321, ci95=[0.40, 0.46])
    (results / "ablation-dev16-2099-01-01.json").write_text(json.dumps(data))
    row = next(r for r in script.table(results).splitlines() if "ablations" in r)
    assert "no critics 0.432 [0.40, 0.46]" in row and "no step filter" not in row
    assert row.index("DigiRL 0.740") < row.index("no critics") < row.index("Filtered BC 0.718")
    assert "`ablation-dev16-2099-01-01.json`" in row
