"""``python -m kai_scale.runner`` is ``kai-scale-runner``."""

import sys

from kai_scale.runner.cli import main

sys.exit(main())
