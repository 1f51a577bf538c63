"""The nightly watch: run oracles against the newest torch every day, bisect every flip.

``config`` reads the ``[watch]``, ``[[suite]]`` and ``[notify]`` tables of ``bisector.toml``;
``sources`` finds the newest torch of a suite (a nightly or release index, an installed torch,
a wheel file); ``tick`` is one idempotent pass; ``table`` is what ``bisect watch`` and the web
view's ``/watch`` show. Every row lives in the store (``store/watch.py``), so ticks on several
hosts sharing one store need no leader.
"""
