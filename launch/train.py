"""Trains one registered experiment, e.g.

  python launch/train.py --experiment=single_run \
    --gin_file=gin/mehta2021/sin_mlp_digits.gin --gin_param='INIT_SCALE = 10.0' \
    --workdir=runs/sin_s10 --seed=0
"""

from absl import app, flags

from extreme_mem import config, registry

FLAGS = config.define_flags()


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
    config.parse_gin(FLAGS['gin_file'].value, FLAGS['gin_param'].value)
    experiment_cls = registry.EXPERIMENTS.get(FLAGS['experiment'].value)
    experiment_cls(workdir=FLAGS['workdir'].value, seed=FLAGS['seed'].value).run()


if __name__ == '__main__':
    flags.mark_flags_as_required(['workdir'])
    app.run(main)
