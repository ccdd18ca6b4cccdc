"""The rules. Every module in this package is imported, and each Rule subclass registers itself by code."""

import importlib
import pkgutil

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
