"""Ways to get an installable build of a commit; each artifact is content-addressed."""
