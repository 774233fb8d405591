"""Executes colabs/maennel2020_random_labels.ipynb headless on a tiny fake results directory."""

import os

import nbformat
import numpy as np
from absl.testing import absltest

from tests import testing
from tests.experiments import maennel2020_random_labels_test as fakes

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOK = os.path.join(REPO, 'colabs', 'maennel2020_random_labels.ipynb')


class ColabTest(absltest.TestCase):

    def test_executes_on_fake_results(self):
        workdir = self.create_tempdir().full_path
        fakes.write_fake_results(workdir)
        arrays = os.path.join(workdir, 'runs', 'upstream,seed=0', 'activation_sparsity')
        os.makedirs(arrays)
        for step in (0, 20):
            np.savez(os.path.join(arrays, f'step_{step}.npz'), **{'fc/neuron_rates': np.linspace(0, 1, 8),
                                                                  'fc/example_rates': np.full(5, 0.3)})
        outputs = testing.run_notebook(NOTEBOOK, timeout=180, RESULTS_DIR=workdir, INSTALL=False, REPO_DIR=REPO)
        self.assertEmpty([o for o in outputs if o.get('output_type') == 'error'])
        images = [o for o in outputs if 'image/png' in o.get('data', {})]
        self.assertGreaterEqual(len(images), 5)  # Fig. 2, Fig. 5, Fig. 4, two activation figures
        text = ' '.join(str(o.get('data', {}).get('text/markdown', '')) + str(o.get('text', '')) for o in outputs)
        self.assertIn('18 runs in', text)
        self.assertIn('| downstream,arm=no_rescale,seed=1 | downstream | no_rescale |', text)
        # AUC of scratch, seeds 0 and 1: fake curves (0.1, 0.5, 0.7) + 0.01 seed -> 0.45, 0.46.
        self.assertIn('| scratch | 0.455 | 0.005 | 2 |', text)
        self.assertIn('random labels: data basis 0.080', text)
        self.assertIn('width 8: f peaks at σ = 2.000', text)
        self.assertIn('2 activation figures', text)

    def test_notebook_has_no_stored_outputs(self):
        nb = nbformat.read(NOTEBOOK, as_version=4)
        self.assertEqual([c.get('outputs') for c in nb.cells if c.cell_type == 'code' and c.get('outputs')], [])


if __name__ == '__main__':
    absltest.main()
