"""bisector: find the commit that broke PyTorch (or any Python project with a git history)."""

__version__ = "0.1.0"
