"""ESPnet2 extensions for the attention papers' recipes.

Importing this package changes nothing in ESPnet: our entry points make the one explicit call that
does (``espnet_ext.registry.install``).
"""

__version__ = "0.1.0"
