"""ESPnet2 extensions for the attention papers' recipes.

Importing this package makes our model classes available to ESPnet2's tasks (see ``registry``).
"""

__version__ = "0.1.0"

from espnet_ext import typecheck as _typecheck

_typecheck.configure()  # before anything imports ESPnet

from espnet_ext import registry as _registry  # noqa: E402

_registry.install()
