"""Scripts bisector runs inside a probed environment (standard library only)."""
