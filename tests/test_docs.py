"""The README and docs/: the headline tables are `python -m suite headline`'s output from the committed runs, every
relative link resolves, and the README still leads to every document and names the two commands."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from suite.core.errors import ConfigError
from suite.report import headline, headlines, run_index

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("document", headline.DOCUMENTS)
def test_the_headline_is_the_command_output(document) -> None:
    text = (ROOT / document).read_text(encoding="utf-8")
    committed, printed = headline.marked(text), headline.block(document)
    if document == headline.RUN_INDEX and not run_index.revision_date("HEAD", ROOT):
        # a checkout without git's history cannot date a revision: the other columns must still agree
        committed, printed = (re.sub(r" \| [^|]*\|$", " |", t, flags=re.M) for t in (committed, printed))
    assert committed == printed, (
        f"{document}'s headline differs from the committed runs: regenerate it with `python -m suite headline --write`"
    )


def test_a_changed_row_changes_the_headline(tmp_path) -> None:
    """The figures are read from the rows, not kept anywhere else: a run whose chain row is slower says so."""
    table = headlines.SAMPLE
    run = tmp_path / table.run
    run.mkdir(parents=True)
    frame = pd.read_csv(ROOT / table.run / "results.csv", dtype={"params": str, "reason": str, "row_id": str})
    before = headline.render(table, ROOT)
    chain = (frame["variant"] == "fused") & (frame["backend"] == "numba") & (frame["scenario"] == "elementwise_chain")
    frame.loc[chain, ["speedup", "speedup_lo", "speedup_hi"]] = [1.234, 1.2, 1.25]
    frame.to_csv(run / "results.csv", index=False)
    after = headline.render(table, tmp_path)
    assert "1.23× [1.20–1.25]" in after and "1.23× [1.20–1.25]" not in before
    assert "3.83× [3.74–3.96]" in before and "3.83× [3.74–3.96]" not in after


def test_a_case_the_run_lacks_is_one_line_naming_it() -> None:
    missing = headlines.Table(
        run=headlines.SAMPLE.run,
        says="",
        columns=("fused over unfused",),
        cases=(headlines.Case("a chain nobody ran", "elementwise_chain", "scale→cube"),),
    )
    with pytest.raises(ConfigError, match="no timed fused row for 'a chain nobody ran'"):
        headline.render(missing, ROOT)


def test_both_shapes_are_in_the_headline() -> None:
    """Hand matmul and attention against their rivals turn over between 512³ / 4 heads and Llama-3-8B's shapes:
    the headline shows both runs, each with its matmul and attention lines and their rivals' ratios."""
    text = headline.block("README.md")
    assert "results/sample/" in text and "results/model_llama3_8b/" in text
    sample, llama = text.split("results/model_llama3_8b/", 1)
    ratio = r"\d+\.\d\d× \[\d+\.\d\d–\d+\.\d\d\] (pays|neutral|loses)"
    for run in (sample, llama):
        for family in ("matmul|MLP up projection", "attention"):
            line = re.search(rf"^\| [^|]*({family})[^\n]*$", run, flags=re.M)
            assert line is not None, family
            assert len(re.findall(ratio, line.group(0))) == 2, line.group(0)  # over unfused, over torch.compile


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)  # code is not a link
    return re.findall(r"\]\(([^)\s]+)\)", text)


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    heads = re.findall(r"^#+ (.*)$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


@pytest.mark.parametrize("path", [*DOCUMENTS, *sorted((ROOT / "results").rglob("README.md"))],
                         ids=lambda p: str(p.relative_to(ROOT)))  # fmt: skip
def test_every_relative_link_resolves(path) -> None:
    """In the README, docs/ and the committed runs' READMEs (which point into docs/ since the reference moved)."""
    for link in _links(path):
        if re.match(r"[a-z]+:", link):
            continue
        target, _, anchor = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        assert file.exists(), f"{path.name}: {link} does not exist"
        if anchor and file.suffix == ".md":
            assert anchor in _anchors(file), f"{path.name}: {link} names no heading of {file.name}"


def test_the_readme_leads_to_every_document_and_names_both_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {link.partition("#")[0] for link in _links(ROOT / "README.md")}
    assert {f"docs/{p.name}" for p in DOCUMENTS[1:]} <= linked
    assert "nox -s bench" in readme and "nox -s tests" in readme
    assert len(readme.splitlines()) <= 350
