"""Executors turn (artifact, oracle) into a classified run."""
