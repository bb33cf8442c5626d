"""YAML a user hands agentrl (config files, a run's ``config.yaml``, ``--set`` values), read safely.

``yaml.safe_load`` alone accepts three things a config should not: a key written twice (the
second silently wins, so ``train:`` twice drops half the settings), aliases that expand to
millions of values (an "alias bomb": a few lines that become megabytes once echoed or copied),
and bytes that are not UTF-8 (a raw ``UnicodeDecodeError`` traceback). Each is refused here in
one sentence naming the file and, where there is one, the line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from agentrl.errors import UserError

#: The most values (scalars, lists and mappings, aliases counted at their full size) a YAML
#: input may expand to. The largest shipped config has a few hundred; a bomb has millions.
MAX_YAML_VALUES = 100_000

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _DuplicateKey(Exception):
    """A mapping names one key twice: (key, first line, second line)."""


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (YAML says keys are unique)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[str, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                continue
            line = key_node.start_mark.line + 1
            if key_node.value in seen:
                raise _DuplicateKey(key_node.value, seen[key_node.value], line)
            seen[key_node.value] = line
        return super().construct_mapping(node, deep)


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_: set[int]) -> int:
    """Values ``node`` stands for once every alias is expanded (aliases share their node, so
    each node's size is computed once). A node that contains itself has no finite size."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:
        raise _Unbounded("refers to itself through an alias")
    open_.add(key)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [child for pair in node.value for child in pair]
    else:
        children = []
    for child in children:
        total += _expanded_size(child, sizes, open_)
        if total > MAX_YAML_VALUES:
            raise _Unbounded(f"expands to more than {MAX_YAML_VALUES:,} values through aliases")
    open_.discard(key)
    sizes[key] = total
    return total


class _Unbounded(Exception):
    """The document is too big once its aliases are expanded, or is recursive."""


class YAMLSyntaxError(UserError):
    """The text is not YAML at all (a ``--set`` value may then be taken as plain text)."""


def parse_yaml(text: str, where: str) -> Any:
    """Parse one YAML document, bounded and without duplicate keys.

    ``where`` names the input in the sentence (``Config file 'x.yaml'``, ``--set 'env.kwargs'``).
    """
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, {}, set())
        return loader.construct_document(node)
    except _DuplicateKey as exc:
        key, first, second = exc.args
        raise UserError(f"{where} sets '{_cut(key, 60)}' twice (lines {first} and {second}); "
                        f"keep one.") from None
    except _Unbounded as exc:
        raise UserError(f"{where} {exc.args[0]}; write the values out (an alias bomb?).") from None
    except RecursionError:
        raise UserError(f"{where} nests too deep to read.") from None
    except yaml.YAMLError as exc:
        raise YAMLSyntaxError(f"{where} is not valid YAML ({_cut(str(exc).splitlines()[0], 200)}).") from exc
    finally:
        loader.dispose()


def read_yaml_file(path: str | Path, what: str = "Config file") -> Any:
    """Read and parse a YAML file: unreadable, non-UTF-8 and malformed files are one sentence."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise UserError(f"Cannot read {what.lower()} '{path}': {exc.strerror or exc}.") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise UserError(f"{what} '{path}' is not UTF-8 text: line {line} holds the byte "
                        f"0x{data[exc.start]:02x}; save it as UTF-8.") from None
    return parse_yaml(text, f"{what} '{path}'")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
