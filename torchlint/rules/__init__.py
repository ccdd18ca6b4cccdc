"""The rules, one per module in a folder per family (`data/` holds TL1xx, `sync/` TL2xx, ...).

Importing this package imports every rule module; each Rule subclass registers itself by code.
"""

import importlib
import pkgutil

for _module in sorted(m.name for m in pkgutil.walk_packages(__path__, prefix=f"{__name__}.")):
    importlib.import_module(_module)
