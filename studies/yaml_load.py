"""``yaml.safe_load`` that refuses a key given twice in one mapping (plain YAML keeps the last one in silence, so
a study with two ``sizes:`` would train the second without a word)."""

from __future__ import annotations

from typing import Any

import yaml


class DuplicateKeyError(ValueError):
    """A mapping of a YAML document holds the same key twice; the message names it and both lines."""


class _UniqueKeyLoader(yaml.SafeLoader):
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:  # the mapping's own keys: a merge (<<) may be overridden, as YAML allows
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    where = f"lines {seen[key]} and {line}" if seen[key] != line else f"line {line}"
                    raise DuplicateKeyError(
                        f"key {key!r} appears twice in one mapping ({where}): YAML would keep "
                        "the last one in silence; keep one"
                    )
                seen[key] = line
            except TypeError:  # an unhashable key: the constructor reports it
                continue
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """The document in ``text``, as ``yaml.safe_load`` reads it, except that a duplicate key is an error."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
