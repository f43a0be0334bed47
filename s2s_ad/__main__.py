"""``python -m s2s_ad``: the ``s2s-ad`` command line."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
