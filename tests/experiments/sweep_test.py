"""Tests for extreme_mem/experiments/sweep.py: axes, random search, skipping finished runs."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from unittest import mock

import numpy as np
import pytest
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

    def test_variants_seeds_and_zipped_axes(self):
        specs = sweep.make_specs({'A, B': [(1, 2.5), (3, 4.0)]}, {'x': {'C': 'c'}, 'y': {}}, seeds=[0, 1])
        self.assertLen(specs, 8)
        self.assertEqual(specs[1].name, 'x,A=1,B=2.5,seed=1')
        self.assertEqual(specs[1].bindings, ("C = 'c'", 'A = 1', 'B = 2.5'))
        self.assertEqual(specs[1].values, {'variant': 'x', 'A': 1, 'B': 2.5, 'seed': 1})
        self.assertEqual(specs[1].seed, 1)
        with self.assertRaisesRegex(ValueError, 'collide'):
            sweep.make_specs(points=[{'A': 1}, {'A': 1}])

    def test_each_run_gets_the_sweep_files_bindings_seed_and_flags(self):
        workdir = self.create_tempdir().full_path
        specs = sweep.make_specs({'INIT_SCALE': [0.1, 1.0]}, seeds=[3])
        calls = []

        def fake_popen(cmd, **kwargs):
            calls.append(cmd)
            directory = [c for c in cmd if c.startswith('--workdir=')][0][len('--workdir='):]
            status = 'done' if 'INIT_SCALE = 0.1' in ' '.join(cmd) else 'diverged'
            with open(os.path.join(directory, 'results.json'), 'w') as f:
                json.dump({'status': status, 'final': {'test/accuracy': 0.9}, 'history': [], 'final_step': 5}, f)
            return mock.Mock(pid=0, wait=mock.Mock(return_value=0))

        with mock.patch.object(sweep.subprocess, 'Popen', fake_popen):
            out = sweep.run_sweep(specs, workdir, gin_files=['gin/mehta2021/fig1a_sin_digits.gin'],
                                  gin_params=['X = 1'], parallel=1, overwrite=True)
        self.assertLen(calls, 2)
        cmd = calls[0]
        self.assertIn('--experiment=single_run', cmd)
        self.assertIn('--seed=3', cmd)
        self.assertIn('--overwrite', cmd)
        self.assertIn(f'--gin_file={os.path.join(sweep.config.REPO_ROOT, "gin/mehta2021/fig1a_sin_digits.gin")}', cmd)
        self.assertLess(cmd.index('--gin_param=X = 1'), cmd.index('--gin_param=INIT_SCALE = 0.1'))
        self.assertEqual([r['status'] for _, r in out], ['done', 'diverged'])
        self.assertEqual(sweep.status_line(out), '1 done, 0 failed, 1 diverged')
        self.assertTrue(sweep.all_ok(out))
        table = sweep.aggregate(out, workdir, ['test/accuracy'])
        self.assertIn('| INIT_SCALE=0.1,seed=3 | 0.1 | 3 | done | 5 | 0.9 |', table)

    def test_failed_and_timed_out_runs_are_failed_and_the_sweep_goes_on(self):
        workdir = self.create_tempdir().full_path
        slow, bad, good = sweep.grid({'INIT_SCALE': [0.1, 1.0, 10.0]})

        def fake_popen(cmd, **kwargs):
            kwargs['stdout'].write('error: something clear\n')
            kwargs['stdout'].flush()
            if any('INIT_SCALE = 0.1' in c for c in cmd):
                wait = mock.Mock(side_effect=[sweep.subprocess.TimeoutExpired(cmd, 5), -15])
            else:
                wait = mock.Mock(return_value=2 if any('INIT_SCALE = 1.0' in c for c in cmd) else 0)
            if any('INIT_SCALE = 10.0' in c for c in cmd):
                with open(sweep.run_dir(workdir, good) / 'results.json', 'w') as f:
                    json.dump({'status': 'done', 'final': {}, 'history': []}, f)
            return mock.Mock(pid=12345, wait=wait)

        with mock.patch.object(sweep.subprocess, 'Popen', fake_popen), \
                mock.patch.object(sweep.os, 'killpg') as killpg:
            out = sweep.run_sweep([slow, bad, good], workdir, parallel=1, timeout=5)
        killpg.assert_called_once_with(12345, sweep.signal.SIGTERM)
        self.assertEqual([r['status'] for _, r in out], ['failed', 'failed', 'done'])
        self.assertEqual(out[1][1]['error'], 'error: something clear')
        self.assertEqual(sweep.status_line(out), '1 done, 2 failed, 0 diverged')
        self.assertFalse(sweep.all_ok(out))

    def test_garbage_results_json_is_a_failed_run_not_a_crash(self):
        workdir = self.create_tempdir().full_path
        spec, = sweep.grid({'A': [1]})

        def fake_popen(cmd, **kwargs):
            with open(sweep.run_dir(workdir, spec) / 'results.json', 'w') as f:
                f.write('[1, 2, 3]')
            return mock.Mock(pid=0, wait=mock.Mock(return_value=0))

        with mock.patch.object(sweep.subprocess, 'Popen', fake_popen):
            out = sweep.run_sweep([spec], workdir, parallel=1)
        self.assertEqual(sweep.status_counts(out)['missing'], 1)
        self.assertFalse(sweep.all_ok(out))

    def test_name_collision(self):
        spec = sweep.make_specs({'A': [1]})[0]
        with self.assertRaisesRegex(ValueError, 'collide'):
            sweep.run_sweep([spec, spec], self.create_tempdir().full_path)


PARENT = """
import sys, pathlib
from extreme_mem.experiments import sweep
sweep.TRAIN_SCRIPT = pathlib.Path(sys.argv[1])
sweep.run_sweep(sweep.make_specs({'A': [1]}), sys.argv[2], parallel=1)
"""
CHILD = """
import os, sys, time
workdir = [a for a in sys.argv if a.startswith('--workdir=')][0][len('--workdir='):]
open(os.path.join(workdir, 'pid'), 'w').write(str(os.getpid()))
time.sleep(120)
"""


@pytest.mark.timeout(60)
def test_children_die_with_a_killed_sweep(tmp_path):
    """`kill -9` of the sweep process ends its runs too (they would train on unattended)."""
    child = tmp_path / 'child.py'
    child.write_text(CHILD)
    env = {**os.environ, 'PYTHONPATH': str(sweep.config.REPO_ROOT)}
    parent = subprocess.Popen([sys.executable, '-c', PARENT, str(child), str(tmp_path / 'sweep')], env=env)
    pid_file = tmp_path / 'sweep' / 'runs' / 'A=1' / 'pid'
    deadline = time.time() + 40
    while not pid_file.exists() or not pid_file.read_text():
        assert time.time() < deadline, 'the run never started'
        time.sleep(0.2)
    child_pid = int(pid_file.read_text())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 10
    while _alive(child_pid):
        assert time.time() < deadline, f'run process {child_pid} outlived its sweep'
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f'/proc/{pid}/stat') as f:  # a zombie has exited
        return f.read().split()[2] != 'Z'


if __name__ == '__main__':
    absltest.main()
