"""Tests for extreme_mem/runs.py: a finished run's exported model round-trips exactly."""

import json
import os

import gin
import numpy as np
import tensorflow as tf

import extreme_mem
from extreme_mem import config, registry
from extreme_mem.experiments import base
from tests import testing

SMALL = ['models.mlp.width = 16', 'train.Trainer.num_steps = 4', 'train.Trainer.eval_every = 2',
         'train.Trainer.batch_size = 64', 'train.Trainer.log_every = 2', 'train.Trainer.checkpoint_every = 4',
         'METRIC_EVERY = 2']


class LoadRunTest(testing.GinCleanMixin, tf.test.TestCase):

    def test_sin_model_round_trips_exactly(self):
        workdir = self.create_tempdir().full_path
        config.parse_gin(['gin/mehta2021/fig1a_sin_digits.gin'], SMALL, finalize=False)
        experiment = base.SingleRun(workdir=workdir, seed=0)
        self.assertEqual(experiment.run()['status'], 'done')
        data = experiment.build_dataset()
        # Independent path: the same architecture rebuilt from code, weights from the last checkpoint.
        reference = registry.MODELS.get('mlp')(input_shape=data.info.input_shape, num_outputs=data.info.num_classes)
        tf.train.Checkpoint(model=reference).restore(
            tf.train.latest_checkpoint(os.path.join(workdir, 'checkpoints'))).expect_partial()
        gin.clear_config()

        run = extreme_mem.load_run(workdir)
        x = np.asarray(data.test.images[:50])
        self.assertTrue(np.array_equal(run.model.predict(x, verbose=0), reference.predict(x, verbose=0)))
        self.assertEqual(run.model.get_layer('hidden_rep').activation.__name__, 'sin')
        self.assertEqual(run.results, json.load(open(os.path.join(workdir, 'results.json'))))
        self.assertIn('mlp.width = 16', run.config)

    def test_unfinished_run_says_so(self):
        workdir = self.create_tempdir().full_path
        with self.assertRaisesRegex(FileNotFoundError, 'holds no run'):
            extreme_mem.load_run(workdir)
        with open(os.path.join(workdir, 'results.json'), 'w') as f:
            json.dump({'status': 'running', 'final': {}, 'history': []}, f)
        with self.assertRaisesRegex(FileNotFoundError, "the run is 'running'"):
            extreme_mem.load_run(workdir)
        self.assertEqual(extreme_mem.load_run(workdir, with_model=False).results['status'], 'running')


if __name__ == '__main__':
    tf.test.main()
