"""Pytest setup shared by the suite: quiet TF logs, tests/ importable as a package."""

import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import flags  # noqa: E402

from extreme_mem import registry_imports  # noqa: E402,F401  (registers every plugin and configurable)

# absltest helpers (create_tempdir) read flags; pytest does not parse them.
if not flags.FLAGS.is_parsed():
    flags.FLAGS.mark_as_parsed()
