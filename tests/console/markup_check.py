"""Parse a console page and say what markup it holds: what the hostile-strings tests assert on."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html.parser import HTMLParser

TAGS = {
    "div",
    "style",
    "span",
    "b",
    "h3",
    "h4",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "a",
    "cwdb-action",
    "input",
    "form",
    "button",
    "p",
}
ATTRIBUTES = {
    "class",
    "type",
    "name",
    "placeholder",
    "size",
    "action",
    "endpoint",
    "display",
    "confirmation",
    "href",
    "value",
    "method",
    "data-confirm",
}


@dataclass
class Parsed(HTMLParser):
    tags: set[str] = field(default_factory=set)
    attributes: set[str] = field(default_factory=set)
    text: list[str] = field(default_factory=list)
    actions: list[dict[str, object]] = field(default_factory=list)
    hrefs: list[str] = field(default_factory=list)
    _in_action: bool = False

    def __post_init__(self) -> None:
        super().__init__(convert_charrefs=True)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.update(name for name, _ in attrs)
        self._in_action = tag == "cwdb-action"
        self.hrefs += [v or "" for k, v in attrs if k == "href"]
        self.actions += [
            json.loads(v or "{}") for k, v in attrs if k == "value" and v and v[0] == "{"
        ]

    def handle_endtag(self, tag: str) -> None:
        self._in_action = False

    def handle_data(self, data: str) -> None:
        if self._in_action:
            self.actions.append(json.loads(data))  # a cwdb-action's content is JSON, whole
        else:
            self.text.append(data)


def parse(page: str) -> Parsed:
    parsed = Parsed()
    parsed.feed(page)
    parsed.close()
    return parsed


def assert_inert(page: str) -> Parsed:
    """Nothing but the console's own tags and attributes: no script, no image, no handler."""
    parsed = parse(page)
    assert parsed.tags <= TAGS, parsed.tags - TAGS
    assert parsed.attributes <= ATTRIBUTES, parsed.attributes - ATTRIBUTES
    assert not any(h.lower().startswith(("javascript", "data:")) for h in parsed.hrefs)
    return parsed
