"""TextWorld's context-sensitive grammar, with its parses done once instead of on every use.

``ContextSensitiveGrammar.derive`` parses its start string with TatSu on every call, and every
conditional rule and ``{... | query}`` symbol parses its logic query again each time it is
expanded. On an ALFWorld step that parsing is most of the time left after the command memo
(``engine.py``). :class:`CachedGrammar` keeps the parsed form of each start string and each
query; the derivation itself (which facts match, which rule applies, what text comes out) is
unchanged, so the text is exactly the same (``tests/envs/test_alfworld_env.py`` compares it
with TextWorld's own grammar).
"""

from __future__ import annotations

import functools
from copy import deepcopy
from typing import Any

from textworld.envs.pddl import textgen
from textworld.logic import Rule


@functools.lru_cache(maxsize=4096)
def parsed_query(expression: str) -> Rule:
    """A logic query ("holds(a:agent, o:object) & ...") parsed once; rules are read-only."""
    return Rule.parse_conjunctive_query(expression)


class CachedConditionalSymbol(textgen.ConditionalSymbol):
    """``{expression | query}``: one copy of the expression per match of the (parsed) query."""

    def derive(self) -> list[textgen.Symbol]:
        if len(self.context) == 0:
            raise ValueError("Empty context")
        context = textgen.copy_context(self.context)
        contexts = [context]
        if self.given:
            contexts = []
            state = context["state"]
            for mapping in state.all_assignments(parsed_query(self.given), context["mapping"]):
                matched = textgen.copy_context(context)
                infos = matched["entity_infos"]
                matched["variables"].update(
                    {ph.name: infos[var.name] for ph, var in mapping.items()}
                )
                matched["mapping"].update(mapping)
                contexts.append(matched)
        return [self.expression.copy(c) for c in contexts]


def _use_cached_queries(symbol: Any) -> None:
    """Switch the conditional symbols inside a parsed symbol to the cached-query kind."""
    if type(symbol) is textgen.ConditionalSymbol:
        symbol.__class__ = CachedConditionalSymbol
    for child in (getattr(symbol, "expression", None), getattr(symbol, "symbol", None)):
        if isinstance(child, textgen.Symbol):
            _use_cached_queries(child)


class CachedGrammar(textgen.ContextSensitiveGrammar):
    """A grammar whose rules, start strings and queries are parsed only once."""

    def __init__(self) -> None:
        super().__init__()
        self._parsed_starts: dict[str, list[textgen.Symbol]] = {}

    @classmethod
    def adopt(cls, grammar: textgen.ContextSensitiveGrammar) -> CachedGrammar:
        """A cached grammar with the production rules of an already parsed one."""
        cached = cls()
        cached.update(grammar)
        for rules in cached._rules.values():
            for rule in rules:
                for symbol in rule.rhs:
                    _use_cached_queries(symbol)
        return cached

    def replace(self, start: textgen.Symbol) -> list[textgen.Symbol]:
        rules = self._rules.get(str(start))
        if not rules:
            raise textgen.CSGUnknownSymbolError(start)
        state, mapping = start.context["state"], start.context["mapping"]
        for rule in rules:  # the first rule whose condition holds (or that has none)
            if not rule.condition or any(
                True for _ in state.all_assignments(parsed_query(rule.condition), mapping)
            ):
                break
        else:
            raise IndexError(f"no rule of #{start}# applies")  # as TextWorld: rules[0] fails
        symbols = deepcopy(rule.rhs)
        for symbol in symbols:
            symbol.context = textgen.copy_context(start.context)
        return symbols

    def derive(self, start: str, context: dict[str, Any] | None = None) -> str:
        context = context or {}
        parsed = self._parsed_starts.get(start)
        if parsed is None:
            parsed = textgen._parse_and_convert(start, rule_name="symbols")
            for symbol in parsed:
                _use_cached_queries(symbol)
            self._parsed_starts[start] = parsed
        stack = deepcopy(parsed)[::-1]  # a stack: the next symbol to expand is on top
        for symbol in stack:
            symbol.context = textgen.copy_context(context)
        out: list[str] = []
        while stack:
            symbol = stack.pop()
            if isinstance(symbol, textgen.TerminalSymbol):
                out.append(str(symbol))
            elif isinstance(symbol, textgen.NonterminalSymbol):
                stack.extend(self.replace(symbol)[::-1])
            elif isinstance(symbol, (textgen.ConditionalSymbol, textgen.EvalSymbol,
                                     textgen.ListSymbol)):
                stack.extend(symbol.derive()[::-1])
            else:
                raise NotImplementedError(f"Unknown symbol: {type(symbol)}")
        return "".join(out)
