"""The core's private insides: free to change; the public face is ``composo``, ``composo.types``,
``composo.errors``, ``composo.plugins`` and, for integrations, ``composo.ext``."""
