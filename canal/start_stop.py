"""canal's start/stop lifecycle as an interface, and its context-manager half as a mixin.

``with component:`` starts it and stops it when the block ends, however it ends. Each component keeps its own
``start()`` / ``stop()`` (locking, partial-start cleanup and errors differ between them); only this part is the same.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self


class StartStopContext:
    """``__enter__`` calls ``start()`` and returns the component; ``__exit__`` calls ``stop()``."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class StartStopComponent(Protocol):
    """The lifecycle members the manager interfaces (meta, log positions) share."""

    @property
    def is_started(self) -> bool: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...
