"""Several boxes: ``bisect worker`` processes take probes from a queue in a PostgreSQL store.

An entry point like ``watch/``: ``queue.py`` is Procrastinate's side (the schema, the jobs, a
coordinator's handle on them, the hand-back of jobs whose worker went silent), ``job.py`` runs
one probe task in a worker, ``process.py`` is the worker process itself.
"""
