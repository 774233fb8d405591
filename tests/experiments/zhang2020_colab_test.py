"""Executes colabs/zhang2020_identity_crisis.ipynb headless on a tiny fake sweep directory."""

import json
import os

import nbformat
from absl.testing import absltest

from tests import testing
from tests.experiments import zhang2020_identity_crisis_test as fakes

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOK = os.path.join(REPO, 'colabs', 'zhang2020_identity_crisis.ipynb')


class ColabTest(absltest.TestCase):

    def test_executes_on_fake_results(self):
        workdir = self.create_tempdir().full_path
        fakes.write_fake_sweep(workdir)
        # A run that failed before evaluating: shown with blanks, never a crash.
        path = os.path.join(workdir, 'report.json')
        with open(path) as f:
            summary = json.load(f)
        failed = dict(summary['runs'][0], run='cnn,depth=20', architecture='cnn', depth=20, status='failed')
        failed['identity_correlation'] = {k: None for k in failed['identity_correlation']}
        failed['constant_correlation'] = dict(failed['identity_correlation'])
        summary['runs'].append(failed)
        with open(path, 'w') as f:
            json.dump(summary, f)
        outputs = testing.run_notebook(NOTEBOOK, timeout=120, RESULTS_DIR=workdir, INSTALL=False, REPO_DIR=REPO)
        self.assertEmpty([o for o in outputs if o.get('output_type') == 'error'])
        images = [o for o in outputs if 'image/png' in o.get('data', {})]
        self.assertGreaterEqual(len(images), 5)  # Fig. 4 x3 architectures, Fig. 8, training curves
        text = ' '.join(str(o.get('data', {}).get('text/markdown', '')) + str(o.get('text', '')) for o in outputs)
        self.assertIn('5 runs in', text)
        self.assertIn('done 4', text)
        self.assertIn('failed 1', text)
        self.assertIn('| cnn,depth=3 | cnn | 3 | done |', text)

    def test_notebook_has_no_stored_outputs(self):
        nb = nbformat.read(NOTEBOOK, as_version=4)
        self.assertEqual([c.get('outputs') for c in nb.cells if c.cell_type == 'code' and c.get('outputs')], [])


if __name__ == '__main__':
    absltest.main()
