"""An oracle that does not compile: refused before anything is stored."""
import sys

def broken(:
    sys.exit(0)
