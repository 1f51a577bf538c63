"""What bisector says about a bisection, as text: ``show``'s Markdown and JSON, ``log``, the
GitHub issue, the one-file HTML report and the web pages' templates, and the sentences and
pasteable commands they share. Everything here reads a stored bisection's view and writes
words; nothing here runs a probe or changes the store (but the reports and snapshots written
when a bisection ends, :mod:`bisector.app.report.views`).
"""
