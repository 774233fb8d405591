"""Runs one registered experiment: a single training run or a paper's sweep, e.g.

  one run:   python launch/train.py --gin_file=gin/mehta2021/fig1a_sin_digits.gin
               --gin_param='INIT_SCALE = 10.0' --workdir=runs/sin_s10
  a sweep:   python launch/train.py --experiment=extreme_memorization
               --gin_file=gin/mehta2021/fig1a_sin_digits.gin --workdir=runs/fig1a

A user error (bad config, bad data, a workdir in use or holding another configuration's run)
prints one line and exits with status 2; `--verbose` adds the traceback. A sweep whose runs did
not all finish exits with status 1 after its summary line.
"""

import os
import sys

# TensorFlow's C++ start-up noise is off unless --verbose (set before TensorFlow is imported).
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '0' if '--verbose' in sys.argv else '2')

from absl import app, flags, logging  # noqa: E402  pylint: disable=g-import-not-at-top

from extreme_mem import config, registry, registry_imports  # noqa: E402,F401  (registers every plugin)
from extreme_mem.experiments import base  # noqa: E402

FLAGS = config.define_flags()
flags.adopt_module_key_flags(config)  # --help lists the shared flags, not only --helpfull


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
    try:
        config.parse_gin(FLAGS['gin_file'].value, FLAGS['gin_param'].value)
        experiment_cls = registry.EXPERIMENTS.get(FLAGS['experiment'].value)
        experiment = experiment_cls(workdir=FLAGS['workdir'].value, seed=FLAGS['seed'].value,
                                    overwrite=FLAGS['overwrite'].value)
        result = experiment.run()
    except base.user_errors() as e:
        if FLAGS['verbose'].value:
            raise
        logging.debug('Traceback of the error below:', exc_info=True)
        print(f'error: {e}', file=sys.stderr)
        print('(rerun with --verbose for the traceback)', file=sys.stderr)
        sys.exit(2)
    if isinstance(result, dict) and result.get('ok') is False:
        print(f'{experiment.name}: {result.get("status_line")}; see {FLAGS["workdir"].value}/sweep.md',
              file=sys.stderr)
        sys.exit(1)


if __name__ == '__main__':
    flags.mark_flags_as_required(['workdir'])
    app.run(main)
