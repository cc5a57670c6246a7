"""Adapters: implementations of the core's ports on third-party services (Cloud Storage, ...).

Only modules in this package (and ``memrepo.devstack``) import ``google.cloud``; they import it
lazily, so a cold start pays for an SDK only when it is used.
"""
