"""The README's generated sections (schemas, cause catalog) match the code.

Regenerate them with ``uv run python tests/test_readme.py --regenerate``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from engine.rules.catalog import catalog_markdown
from engine.rules.loader import load_rule_pack
from ingest.schema import schema_markdown

README = Path(__file__).resolve().parents[1] / "README.md"


def generated_sections() -> dict[str, str]:
    """Section name → the Markdown the code generates for it."""
    return {"schemas": schema_markdown(), "cause-catalog": catalog_markdown(load_rule_pack())}


def section(text: str, name: str) -> str:
    match = re.search(rf"<!-- {name}:start -->\n(.*?)<!-- {name}:end -->", text, re.S)
    assert match, f"README has no {name} section"
    return match.group(1)


def test_generated_readme_sections_are_current():
    text = README.read_text()
    for name, body in generated_sections().items():
        assert section(text, name).strip() == body.strip(), f"README section '{name}' is stale: regenerate it"


if __name__ == "__main__" and sys.argv[1:] == ["--regenerate"]:
    text = README.read_text()
    for name, body in generated_sections().items():
        text = re.sub(rf"(<!-- {name}:start -->\n).*?(<!-- {name}:end -->)",
                      lambda m, b=body: m.group(1) + b.strip() + "\n" + m.group(2), text, flags=re.S)
    README.write_text(text)
