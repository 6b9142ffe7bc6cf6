#!/usr/bin/env python3
"""colo-profile: the command line of colo's profiler (the `colo` Python package beside it).

Finds the package in $COLO_PYTHON_DIR, in python/ beside this folder (the source tree and a build's
folder) or in share/colo/python (an installation).
"""

import os
import sys


def _package_parent():
    here = os.path.dirname(os.path.realpath(__file__))
    candidates = [os.environ.get("COLO_PYTHON_DIR", ""),
                  os.path.join(here, "..", "python"),
                  os.path.join(here, "..", "share", "colo", "python")]
    for folder in filter(None, candidates):
        if os.path.isfile(os.path.join(folder, "colo", "profiler.py")):
            return os.path.abspath(folder)
    sys.exit("colo-profile: colo's Python package not found (set COLO_PYTHON_DIR)")


sys.path.insert(0, _package_parent())
from colo.profiler import *  # noqa: E402,F401,F403  (also what `import colo_profile` gives)
from colo.profiler import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
