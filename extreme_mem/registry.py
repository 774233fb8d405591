"""Name -> plugin maps, one `Registry` per plugin kind.

The registry chooses *which* class or factory to use; gin sets its constructor arguments.
Unknown or duplicate names raise at once, naming the known entries and the closest match.
"""

import difflib
from typing import Any, Callable, TypeVar

T = TypeVar('T')


class Registry:
    """Name -> class/function map for one plugin kind."""

    def __init__(self, kind: str):
        self._kind = kind
        self._entries: dict[str, Any] = {}

    @property
    def kind(self) -> str:
        return self._kind

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator registering `obj` under `name`.

        Raises:
          KeyError: `name` is already registered for this kind.
        """

        def decorator(obj: T) -> T:
            if name in self._entries:
                raise KeyError(f'{self._kind} {name!r} registered twice.')
            self._entries[name] = obj
            return obj

        return decorator

    def get(self, name: str) -> Any:
        """Returns the entry registered as `name`.

        Raises:
          LookupError: unknown name; the message lists the known names and the closest match.
        """
        if name not in self._entries:
            close = difflib.get_close_matches(str(name), list(self._entries), n=1)
            hint = f' Did you mean {close[0]!r}?' if close else ''
            raise LookupError(
                f'Unknown {self._kind} {name!r}; known: {self.names()}.{hint} '
                'Is its module inside a package that extreme_mem/registry_imports.py walks?'
            )
        return self._entries[name]

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries


DATASETS = Registry('dataset')
MODELS = Registry('model')
LOSSES = Registry('loss')
METRICS = Registry('metric')
WRITERS = Registry('writer')
EXPERIMENTS = Registry('experiment')
