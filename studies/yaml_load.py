"""``yaml.safe_load`` that refuses what plain YAML reads otherwise than a user meant, in silence: a key given twice
in one mapping (YAML keeps the last, so a study with two ``sizes:`` would train the second), and the numbers of
YAML 1.1, which PyYAML speaks, written in base 60 or octal (``1:20`` is 80, ``0064`` is 52)."""

from __future__ import annotations

import re
from typing import Any

import yaml


class StudyYamlError(ValueError):
    """A YAML document that parses but would not mean what it says; the message names the line."""


class DuplicateKeyError(StudyYamlError):
    """A mapping of a YAML document holds the same key twice; the message names it and both lines."""


class AmbiguousNumberError(StudyYamlError):
    """A scalar that YAML 1.1 reads as a base-60 or octal number."""


# YAML 1.1's resolver takes these for numbers; YAML 1.2 and every other reader of the file for text or decimals
_BASE_60 = re.compile(r"[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?")
_OCTAL = re.compile(r"[-+]?0[0-7_]+")


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

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        self._refuse_ambiguous(node)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        self._refuse_ambiguous(node)
        return super().construct_yaml_float(node)

    def _refuse_ambiguous(self, node: yaml.ScalarNode) -> None:
        text = str(node.value)
        kind = "base 60" if _BASE_60.fullmatch(text) else "octal" if _OCTAL.fullmatch(text) else None
        if kind is None:
            return
        reads_as = (super().construct_yaml_int if node.tag.endswith(":int") else super().construct_yaml_float)(node)
        if kind == "octal" and reads_as == int(text.replace("_", ""), 10):  # 00 or 007: the same in decimal
            return
        raise AmbiguousNumberError(
            f"line {node.start_mark.line + 1}: {text} reads as {reads_as:g} in YAML 1.1 ({kind}); write the number "
            f"you mean in decimal{' without leading zeros' if kind == 'octal' else ''}, or quote it if it is text"
        )


# the resolver passes a node's tag, not the loader's method: bind the refusing constructors to the tags
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:float", _UniqueKeyLoader.construct_yaml_float)


def load_yaml(text: str) -> Any:
    """The document in ``text``, as ``yaml.safe_load`` reads it, except that a duplicate key or a base-60 or octal
    number is a :class:`StudyYamlError`."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
