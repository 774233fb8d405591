"""Tests for extreme_mem/experiments/sweep.py: axes, random search, skipping finished runs."""

import json
import math
import os
from unittest import mock

import numpy as np
from absl.testing import absltest

from extreme_mem.experiments import sweep


class SweepTest(absltest.TestCase):

    def test_grid_is_cartesian_product(self):
        specs = sweep.grid({'INIT_SCALE': [0.1, 1.0], 'models.mlp.activation': ['sin', 'relu']})
        self.assertLen(specs, 4)
        self.assertEqual(specs[1].bindings, ('INIT_SCALE = 0.1', "models.mlp.activation = 'relu'"))
        self.assertEqual(specs[1].name, 'INIT_SCALE=0.1,activation=relu')
        self.assertLen({s.name for s in specs}, 4)

    def test_parse_axis(self):
        self.assertEqual(sweep.parse_axis('A=1,2.5,relu,True'), ('A', [1, 2.5, 'relu', True]))
        with self.assertRaisesRegex(ValueError, 'KEY=v1,v2'):
            sweep.parse_axis('A')

    def test_random_search_loguniform(self):
        specs = sweep.random_search({'LR': ('loguniform', (1e-4, 1e-1)), 'W': ('choice', [64, 128])}, 400, seed=1)
        lrs = np.array([s.values['LR'] for s in specs])
        self.assertTrue(np.all((lrs >= 1e-4) & (lrs <= 1e-1)))
        # log10(LR) is uniform on [-4, -1]: mean -2.5, variance 9/12.
        self.assertAlmostEqual(np.log10(lrs).mean(), -2.5, delta=4 * math.sqrt(0.75 / 400))
        self.assertEqual({s.values['W'] for s in specs}, {64, 128})
        again = sweep.random_search({'LR': ('loguniform', (1e-4, 1e-1)), 'W': ('choice', [64, 128])}, 400, seed=1)
        self.assertEqual(specs, again)
        with self.assertRaisesRegex(ValueError, "Unknown distribution 'normal'"):
            sweep.random_search({'LR': ('normal', (0, 1))}, 1)

    def test_finished_runs_are_skipped(self):
        workdir = self.create_tempdir().full_path
        done, todo = sweep.grid({'INIT_SCALE': [0.1, 1.0]})
        os.makedirs(sweep.run_dir(workdir, done))
        with open(sweep.run_dir(workdir, done) / 'results.json', 'w') as f:
            json.dump({'status': 'done', 'final': {'test/accuracy': 0.9}, 'history': []}, f)
        calls = []

        def fake_run(cmd, **kwargs):
            calls.append(cmd)
            with open(sweep.run_dir(workdir, todo) / 'results.json', 'w') as f:
                json.dump({'status': 'done', 'final': {'test/accuracy': 0.2}, 'history': [], 'final_step': 5}, f)
            return mock.Mock(returncode=0)

        with mock.patch.object(sweep.subprocess, 'run', fake_run):
            out = sweep.run_sweep([done, todo], workdir, gin_files=['gin/mehta2021/fig1a_sin_digits.gin'],
                                  gin_params=['X = 1'], parallel=1)
        self.assertLen(calls, 1)
        self.assertIn('--gin_param=INIT_SCALE = 1.0', calls[0])
        self.assertIn('--gin_param=X = 1', calls[0])
        table = sweep.aggregate(out, workdir, ['test/accuracy'])
        self.assertIn('| INIT_SCALE=0.1 | 0.1 | done | — | 0.9 |', table)
        rows = json.load(open(os.path.join(workdir, 'sweep.json')))
        self.assertEqual([r['test/accuracy'] for r in rows], [0.9, 0.2])

    def test_timed_out_run_is_failed_and_sweep_goes_on(self):
        workdir = self.create_tempdir().full_path
        slow, fast = sweep.grid({'INIT_SCALE': [0.1, 1.0]})

        def fake_run(cmd, **kwargs):
            if any('INIT_SCALE = 0.1' in c for c in cmd):
                raise sweep.subprocess.TimeoutExpired(cmd, kwargs['timeout'])
            with open(sweep.run_dir(workdir, fast) / 'results.json', 'w') as f:
                json.dump({'status': 'done', 'final': {}, 'history': []}, f)
            return mock.Mock(returncode=0)

        with mock.patch.object(sweep.subprocess, 'run', fake_run):
            out = sweep.run_sweep([slow, fast], workdir, parallel=1, timeout=5)
        self.assertEqual([r['status'] for _, r in out], ['failed', 'done'])

    def test_name_collision(self):
        spec = sweep.make_spec({'A': 1})
        with self.assertRaisesRegex(ValueError, 'collide'):
            sweep.run_sweep([spec, spec], self.create_tempdir().full_path)


if __name__ == '__main__':
    absltest.main()
