"""Which of a shared reader's subscriptions capture a table (:mod:`canal.parse.shared`): its routes.

A reader asks for each table it meets -- whether to decode its rows at all, and to whom its events go. Destinations
of plain-name filters (canal's destination per database or table: ``d007\\.t``) are found by one lookup of the table's
lower-cased name in an index of their names (:attr:`canal.filter.TableFilters.literal_names`); only the others are
asked, each through its filter, and only once per table and set of subscriptions. For a name outside ASCII, where a
filter's case-insensitive match is more than ``lower()``, every subscription is asked.

A :class:`Routes` belongs to one set of subscriptions and is replaced, never changed, when the set changes; the
decoder asks it without the reader's lock, so a route computed from the set before a change goes into the cache of
the :class:`Routes` the change dropped.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar


class Member(Protocol):
    def wants(self, schema: str, table: str) -> bool: ...

    def literal_names(self) -> frozenset[str] | None: ...


class Routed(Protocol):
    @property
    def member(self) -> Member: ...


S = TypeVar("S", bound=Routed)


class Routes(Generic[S]):
    """The routes of the subscriptions ``subs``. Made from the ``before`` routes of another set, a table's route
    keeps the asked subscriptions it had that are still there and asks only the new ones whether they capture it."""

    def __init__(self, subs: tuple[S, ...], before: Routes[S] | None = None) -> None:
        self.subs = subs
        by_name: dict[str, tuple[S, ...]] = {}
        asked: list[S] = []
        for sub in subs:
            names = sub.member.literal_names()
            if names is None:
                asked.append(sub)
            else:
                for name in names:
                    by_name[name] = (*by_name.get(name, ()), sub)
        self._by_name = by_name
        self._asked = tuple(asked)
        self._cache: dict[tuple[str, str], tuple[S, ...]] = {}
        if before is not None:
            routed = frozenset(before.subs)
            for (schema, table), found in list(before._cache.items()):  # the decoder may add to it meanwhile
                had = set(found)
                kept = (s for s in self._asked_for(schema, table) if s in had if s in routed)
                new = (s for s in self._asked_for(schema, table) if s not in routed and s.member.wants(schema, table))
                self._cache[(schema, table)] = (*self._indexed(schema, table), *kept, *new)

    def __call__(self, schema: str, table: str) -> tuple[S, ...]:
        """The subscriptions capturing ``schema.table``."""
        cache = self._cache
        found = cache.get((schema, table))
        if found is None:
            found = self._indexed(schema, table) + tuple(
                s for s in self._asked_for(schema, table) if s.member.wants(schema, table)
            )
            cache[(schema, table)] = found
        return found

    def _indexed(self, schema: str, table: str) -> tuple[S, ...]:
        name = f"{schema}.{table}"
        return self._by_name.get(name.lower(), ()) if name.isascii() else ()

    def _asked_for(self, schema: str, table: str) -> tuple[S, ...]:
        return self._asked if schema.isascii() and table.isascii() else self.subs
