"""Executes colabs/stephenson2021_geometry.ipynb headless on a tiny fake results directory."""

import os

import nbformat
from absl.testing import absltest

from tests import testing
from tests.experiments import stephenson2021_memorization_geometry_test as fakes

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOK = os.path.join(REPO, 'colabs', 'stephenson2021_geometry.ipynb')


class ColabTest(absltest.TestCase):

    def test_executes_on_fake_results(self):
        workdir = self.create_tempdir().full_path
        fakes.write_fake_results(workdir)
        outputs = testing.run_notebook(NOTEBOOK, timeout=180, RESULTS_DIR=workdir, INSTALL=False, REPO_DIR=REPO)
        self.assertEmpty([o for o in outputs if o.get('output_type') == 'error'])
        images = [o for o in outputs if 'image/png' in o.get('data', {})]
        self.assertGreaterEqual(len(images), 5)  # subset accuracy, MFTMA best and final, rewinding, gradients
        text = ' '.join(str(o.get('data', {}).get('text/markdown', '')) + str(o.get('text', '')) for o in outputs)
        self.assertIn('3 runs in', text)
        self.assertIn('| stage | unpermuted | permuted | restored | test |', text)
        self.assertIn('double_descent: nothing to draw', text)
        self.assertIn('no figures/embedding.png', text)
        self.assertIn('α permuted best', text)

    def test_notebook_has_no_stored_outputs(self):
        nb = nbformat.read(NOTEBOOK, as_version=4)
        self.assertEqual([c.get('outputs') for c in nb.cells if c.cell_type == 'code' and c.get('outputs')], [])


if __name__ == '__main__':
    absltest.main()
