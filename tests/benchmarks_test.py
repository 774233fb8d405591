"""benchmarks/pergrad.py and benchmarks/mftma.py on their smallest settings: the printed table
and the `--json` rows agree.

Each script runs as a subprocess (as a user runs it), so the test also covers its flags. The
MFTMA benchmark needs the reference fixtures beside the repository and is skipped without them.
"""

import json
import math
import os
import pathlib
import subprocess
import sys

from absl.testing import absltest

REPO = pathlib.Path(__file__).resolve().parents[1]
MFTMA_FIXTURES = REPO.parent / 'shared' / 'fixtures' / 'mftma'
ROW_KEYS = {'model', 'variant', 'seconds_per_step', 'ratio'}
PERGRAD_VARIANTS = ['plain', 'factored, no Gram', 'factored', 'vectorized_map', 'jacobian', 'loop']
MFTMA_VARIANTS = [
    'ours', 'ours: centre step', 'ours: frames', 'ours: anchor stage', 'SLSQP per QP',
    'nnls per QP', 'reference', 'reference: centre step', 'reference: manifold loop',
]


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', CUDA_VISIBLE_DEVICES='')
    return subprocess.run(
        [sys.executable, str(REPO / 'benchmarks' / script), *args],
        capture_output=True, text=True, timeout=300, env=env, cwd=REPO,
    )


class BenchmarksTest(absltest.TestCase):

    def _check_rows(self, rows, models, variants, baseline):
        self.assertIsInstance(rows, list)
        self.assertEqual([(r['model'], r['variant']) for r in rows],
                         [(m, v) for m in models for v in variants])
        for row in rows:
            self.assertContainsSubset(ROW_KEYS, set(row))
            self.assertIsInstance(row['model'], str)
            self.assertIsInstance(row['variant'], str)
            self.assertTrue(math.isfinite(row['seconds_per_step']) and row['seconds_per_step'] > 0, row)
            base = next(r for r in rows if r['model'] == row['model'] and r['variant'] == baseline)
            self.assertAlmostEqual(row['ratio'], row['seconds_per_step'] / base['seconds_per_step'], places=9)

    def test_pergrad_json(self):
        path = self.create_tempdir().full_path + '/pergrad.json'
        proc = _run('pergrad.py', '--models=mlp,convnet', '--batch=4', '--loop_batch=2',
                    '--jacobian_batch=2', '--repeats=1', f'--json={path}')
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        with open(path) as f:
            rows = json.load(f)
        self._check_rows(rows, ['mlp', 'convnet'], PERGRAD_VARIANTS, baseline='plain')
        # Every JSON row is a row of the printed table: same model, engine and seconds.
        table = proc.stdout.splitlines()
        for row in rows:
            printed = [line for line in table
                       if line.split()[:1] == [row['model']] and f' {row["variant"]} ' in line]
            self.assertLen(printed, 1, (row, table))
            self.assertIn(f'{row["seconds_per_step"]:.4f}', printed[0])
        # Extrapolated rows say so.
        notes = {(r['model'], r['variant']): r.get('note', '') for r in rows}
        self.assertIn('b=2', notes['mlp', 'jacobian'])
        self.assertIn('b=2', notes['convnet', 'loop'])

    def test_pergrad_unknown_model_names_the_choices(self):
        proc = _run('pergrad.py', '--models=mlp,resnet', '--json=/nonexistent/x.json')
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("unknown ['resnet']", proc.stderr)
        self.assertIn("['convnet', 'mlp']", proc.stderr)

    def test_mftma_json(self):
        if not MFTMA_FIXTURES.is_dir():
            self.skipTest(f'MFTMA reference fixtures not found at {MFTMA_FIXTURES}')
        stem = 'a_clouds_P10_M20_N100'
        path = self.create_tempdir().full_path + '/mftma.json'
        proc = _run('mftma.py', f'--fixture={stem}', '--seeds=1', '--baseline-manifolds=1', f'--json={path}')
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        with open(path) as f:
            rows = json.load(f)
        self._check_rows(rows, [stem], MFTMA_VARIANTS, baseline='ours')
        by_variant = {r['variant']: r['seconds_per_step'] for r in rows}
        # The recorded reference time comes from the fixture (RESULTS.md: 3.0 CPU s for `a`).
        with open(MFTMA_FIXTURES / 'data' / f'{stem}.ref.json') as f:
            summary = json.load(f)['by_n_t']['200']['summary_over_seeds']
        self.assertAlmostEqual(by_variant['reference'], summary['cpu_s']['mean'])
        self.assertAlmostEqual(by_variant['reference'], 3.0, delta=0.05)
        self.assertIn(f'{by_variant["ours"]:8.3f}', proc.stdout)

    def test_mftma_unknown_fixture_names_the_choices(self):
        if not MFTMA_FIXTURES.is_dir():
            self.skipTest(f'MFTMA reference fixtures not found at {MFTMA_FIXTURES}')
        proc = _run('mftma.py', '--fixture=z_none')
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("--fixture='z_none' not found", proc.stderr)
        self.assertIn('a_clouds_P10_M20_N100', proc.stderr)


if __name__ == '__main__':
    absltest.main()
