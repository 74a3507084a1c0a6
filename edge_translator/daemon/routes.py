"""Routing: an API module's ``ROUTES`` map ``(method, path)`` to a handler; a path may hold
``{name}`` segments (``/v1/documents/{id}``), which reach the handler as ``request.args``.

Fixed paths are looked up in a dict; templated ones are tried in the order they were
added. Metrics name a request by its template, so that ids do not make a label each.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_SEGMENT = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class Route:
    """One endpoint."""

    method: str
    template: str
    """The path as declared, ``{name}`` segments included; metrics use it as the route's name."""
    handler: Callable
    style: str
    """Which API's error shape its errors take: ``libre``, ``deepl`` or ``native``."""


class Router:
    """Every route of the application."""

    def __init__(self):
        self._fixed: dict[tuple[str, str], Route] = {}
        self._templated: list[tuple[re.Pattern, Route]] = []

    def add(self, method: str, template: str, handler: Callable, style: str) -> None:
        """Add one route.

        Raises:
            ValueError: If the same method and path are already routed.
        """
        route = Route(method, template, handler, style)
        if "{" not in template:
            if (method, template) in self._fixed:
                raise ValueError(f"{method} {template} is routed twice")
            self._fixed[(method, template)] = route
            return
        if any(r.method == method and r.template == template for _, r in self._templated):
            raise ValueError(f"{method} {template} is routed twice")
        self._templated.append((_compile(template), route))

    def add_module(self, routes: dict[tuple[str, str], Callable], style: str) -> None:
        """Add an API module's ``ROUTES``."""
        for (method, template), handler in routes.items():
            self.add(method, template, handler, style)

    def match(self, method: str, path: str) -> tuple[Route | None, dict[str, str]]:
        """The route for a request and its path arguments; ``HEAD`` falls back to ``GET``."""
        for candidate in (method, "GET") if method == "HEAD" else (method,):
            route = self._fixed.get((candidate, path))
            if route is not None:
                return route, {}
            for pattern, route in self._templated:
                if route.method == candidate and (found := pattern.fullmatch(path)):
                    return route, found.groupdict()
        return None, {}

    def allowed(self, path: str) -> list[str]:
        """The methods some route takes on ``path`` (``HEAD`` wherever ``GET`` is), sorted."""
        methods = {m for m, p in self._fixed if p == path}
        methods |= {r.method for pattern, r in self._templated if pattern.fullmatch(path)}
        if "GET" in methods:
            methods.add("HEAD")
        return sorted(methods)


def _compile(template: str) -> re.Pattern:
    """A pattern that matches the template's paths, each ``{name}`` one segment."""
    parts, last = [], 0
    for found in _SEGMENT.finditer(template):
        parts += [re.escape(template[last:found.start()]), f"(?P<{found.group(1)}>[^/]+)"]
        last = found.end()
    return re.compile("".join(parts) + re.escape(template[last:]))
