"""Interfaces: the command line, the web app, and plots that only draw.

Import from the subpackages (``cli``, ``web``, ``plots``) or ``jsonout``: this package exports nothing.
"""

__all__: list[str] = []
