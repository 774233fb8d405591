"""Runs a sweep of one experiment: a grid or random search over gin macros/bindings, e.g.

  python launch/sweep.py --gin_file=gin/mehta2021/fig1a_sin_digits.gin \
    --grid='INIT_SCALE=0.001,0.01,0.1,1.0,10.0' --workdir=runs/sigma --parallel=2

Random search: --loguniform='LR=1e-4,1e-1' --choice='WIDTH=256,1024' --num_samples=20.
Each run lands in <workdir>/runs/<name>/; <workdir>/sweep.{json,md} aggregate the finals.
"""

from absl import app, flags, logging

from extreme_mem import config
from extreme_mem.experiments import sweep

FLAGS = config.define_flags()
_GRID = flags.DEFINE_multi_string('grid', [], "Grid axis 'KEY=v1,v2,...' (repeatable).")
_LOGUNIFORM = flags.DEFINE_multi_string('loguniform', [], "Random axis 'KEY=lo,hi' (log-uniform).")
_UNIFORM = flags.DEFINE_multi_string('uniform', [], "Random axis 'KEY=lo,hi' (uniform).")
_CHOICE = flags.DEFINE_multi_string('choice', [], "Random axis 'KEY=v1,v2,...' (uniform choice).")
_NUM_SAMPLES = flags.DEFINE_integer('num_samples', 0, 'Random-search runs (with random axes).')
_PARALLEL = flags.DEFINE_integer('parallel', 2, 'Runs at once.')
_COLUMNS = flags.DEFINE_list('columns', list(sweep.DEFAULT_COLUMNS), 'Final tags in the table.')


def main(argv):
    del argv
    random_axes = {}
    for kind, values in (('loguniform', _LOGUNIFORM.value), ('uniform', _UNIFORM.value), ('choice', _CHOICE.value)):
        for text in values:
            key, parsed = sweep.parse_axis(text)
            random_axes[key] = (kind, parsed)
    if random_axes and _GRID.value:
        raise app.UsageError('Use either --grid or random axes, not both.')
    if random_axes:
        specs = sweep.random_search(random_axes, _NUM_SAMPLES.value, seed=FLAGS['seed'].value)
    else:
        specs = sweep.grid(dict(sweep.parse_axis(t) for t in _GRID.value))
    results = sweep.run_sweep(specs, FLAGS['workdir'].value, FLAGS['experiment'].value, FLAGS['gin_file'].value,
                              FLAGS['gin_param'].value, FLAGS['seed'].value, _PARALLEL.value)
    logging.info('\n%s', sweep.aggregate(results, FLAGS['workdir'].value, _COLUMNS.value))


if __name__ == '__main__':
    flags.mark_flags_as_required(['workdir'])
    app.run(main)
