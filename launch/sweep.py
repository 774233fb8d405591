"""Runs a sweep of single runs: a grid or random search over gin macros/bindings, e.g.

  python launch/sweep.py --gin_file=gin/mehta2021/fig1a_sin_digits.gin
    --grid='INIT_SCALE=0.001,0.1,10.0' --grid='models.mlp.activation=sin,relu'
    --workdir=runs/sigma --parallel=2

Random search: --loguniform='train.Trainer.learning_rate=1e-3,1e-1'
  --choice='models.mlp.width=256,1024' --num_samples=20.
Each run lands in <workdir>/runs/<name>/ (same machinery as the paper experiments:
`experiments/sweep.py`); <workdir>/sweep.{json,md} aggregate the finals. The exit status is 1
when a run failed, 2 on a user error.
"""

import os
import sys

# TensorFlow's C++ start-up noise is off unless --verbose (set before TensorFlow is imported).
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '0' if '--verbose' in sys.argv else '2')

from absl import app, flags, logging  # noqa: E402  pylint: disable=g-import-not-at-top

from extreme_mem import config, registry_imports  # noqa: E402,F401  (registers every plugin)
from extreme_mem.experiments import base, sweep, workdir_lock  # noqa: E402

FLAGS = config.define_flags()
flags.adopt_module_key_flags(config)  # --help lists the shared flags, not only --helpfull
_GRID = flags.DEFINE_multi_string('grid', [], "Grid axis 'KEY=v1,v2,...' (repeatable).")
_LOGUNIFORM = flags.DEFINE_multi_string('loguniform', [], "Random axis 'KEY=lo,hi' (log-uniform).")
_UNIFORM = flags.DEFINE_multi_string('uniform', [], "Random axis 'KEY=lo,hi' (uniform).")
_CHOICE = flags.DEFINE_multi_string('choice', [], "Random axis 'KEY=v1,v2,...' (uniform choice).")
_NUM_SAMPLES = flags.DEFINE_integer('num_samples', 0, 'Random-search runs (with random axes).')
_PARALLEL = flags.DEFINE_integer('parallel', 2, 'Runs at once.')
_COLUMNS = flags.DEFINE_list('columns', list(sweep.DEFAULT_COLUMNS), 'Final tags in the table.')


def _specs():
    random_axes = {}
    for kind, values in (('loguniform', _LOGUNIFORM.value), ('uniform', _UNIFORM.value), ('choice', _CHOICE.value)):
        for text in values:
            key, parsed = sweep.parse_axis(text)
            random_axes[key] = (kind, parsed)
    if random_axes and _GRID.value:
        raise app.UsageError('Use either --grid or random axes, not both.')
    if random_axes:
        if _NUM_SAMPLES.value < 1:
            raise app.UsageError('Random axes need --num_samples >= 1.')
        return sweep.random_search(random_axes, _NUM_SAMPLES.value, seed=FLAGS['seed'].value)
    return sweep.make_specs(dict(sweep.parse_axis(t) for t in _GRID.value))


def main(argv):
    del argv
    if FLAGS['experiment'].value != 'single_run':
        raise app.UsageError('launch/sweep.py sweeps single runs; run a paper experiment with launch/train.py.')
    workdir = FLAGS['workdir'].value
    try:
        specs = _specs()
        config.parse_gin(FLAGS['gin_file'].value, FLAGS['gin_param'].value)  # fails early on a bad config
        files, params = config.parsed_files_and_bindings()
        with workdir_lock.WorkdirLock(workdir):
            results = sweep.run_sweep(specs, workdir, files, params, FLAGS['seed'].value, _PARALLEL.value,
                                      overwrite=FLAGS['overwrite'].value)
            logging.info('\n%s', sweep.aggregate(results, workdir, _COLUMNS.value))
    except base.user_errors() as e:
        if FLAGS['verbose'].value:
            raise
        print(f'error: {e}', file=sys.stderr)
        sys.exit(2)
    line = sweep.status_line(results)
    print(f'sweep: {line}; see {workdir}/sweep.md', file=sys.stderr)
    if not sweep.all_ok(results):
        sys.exit(1)


if __name__ == '__main__':
    flags.mark_flags_as_required(['workdir'])
    app.run(main)
