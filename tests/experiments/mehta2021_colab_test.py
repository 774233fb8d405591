"""Executes colabs/mehta2021_extreme_memorization.ipynb headless on a tiny fake sweep directory."""

import os

import nbformat
from absl.testing import absltest

from tests import testing
from tests.experiments import mehta2021_extreme_memorization_test as fakes

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOK = os.path.join(REPO, 'colabs', 'mehta2021_extreme_memorization.ipynb')


class ColabTest(absltest.TestCase):

    def test_executes_on_fake_results(self):
        workdir = self.create_tempdir().full_path
        fakes.write_fake_sweep(workdir)
        # A run outside sweep.json that failed before logging anything: shown, never a crash.
        os.makedirs(os.path.join(workdir, 'runs', 'failed_run'))
        with open(os.path.join(workdir, 'runs', 'failed_run', 'results.json'), 'w') as f:
            f.write('{"status": "failed", "final": {}, "history": []}')
        outputs = testing.run_notebook(NOTEBOOK, timeout=120, RESULTS_DIR=workdir, INSTALL=False, REPO_DIR=REPO)
        self.assertEmpty([o for o in outputs if o.get('output_type') == 'error'])
        images = [o for o in outputs if 'image/png' in o.get('data', {})]
        self.assertGreaterEqual(len(images), 4)  # 2 variants of panels, Fig. 1b, Fig. 3
        text = ' '.join(str(o.get('data', {}).get('text/markdown', '')) + str(o.get('text', '')) for o in outputs)
        self.assertIn('11 runs in', text)  # 5 σ × 2 variants + the failed run
        self.assertIn('| failed_run |  | — | failed |', text)
        self.assertIn('other runs: undefined', text)
        self.assertIn('Spearman ρ', text)
        self.assertIn('| sin,INIT_SCALE=0.01 | sin | 0.01 | done |', text)

    def test_notebook_has_no_stored_outputs(self):
        nb = nbformat.read(NOTEBOOK, as_version=4)
        self.assertEqual([c.get('outputs') for c in nb.cells if c.cell_type == 'code' and c.get('outputs')], [])


if __name__ == '__main__':
    absltest.main()
