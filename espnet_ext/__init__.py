"""ESPnet2 extensions for the attention papers' recipes.

Importing this package makes our model classes available to ESPnet2's tasks (see ``registry``).
"""

__version__ = "0.1.0"

from espnet_ext import registry as _registry

_registry.install()
