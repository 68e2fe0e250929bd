"""Markdown building blocks shared by the report and the sections that feed it."""

from __future__ import annotations


def table(head: list[str], rows: list[list[str]]) -> str:
    """A GitHub markdown table; pipes inside cells are escaped."""

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    return "\n".join([line(head), line(["---"] * len(head)), *(line(r) for r in rows)])


def details(summary: str, body: str) -> str:
    """A collapsed block: long tables stay out of the way of the verdict."""
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"
